//! Identity: API tokens (generation, hashing, lookup, expiry) and the start-up story of the
//! admin token.
//!
//! Owns: the token format (`rb_` + 32 random bytes from the OS, base64url), how a token is
//! stored (sha256, hex — enough for high-entropy random secrets), [`Principal`] (who is
//! calling), [`authenticate`] (a known token past its expiry is not a principal), and
//! [`bootstrap`]: `REBALANCER_ADMIN_TOKEN` is an admin token for as long as it is set, and a
//! start without any working admin token creates one and prints it once to standard output.
//! Must not: decide which role a route needs or answer HTTP — that is `http::auth`.

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::config::Secret;
use rebalancer_store::{NewToken, Role, Store, StoreError, TokenOrigin, TokenRecord, now_ms};

/// Prefix of generated tokens (recognisable in secret scanners and logs).
pub const TOKEN_PREFIX: &str = "rb_";
/// Name of the token that `REBALANCER_ADMIN_TOKEN` sets (`:` cannot appear in API names).
pub const ENV_TOKEN_NAME: &str = "env:REBALANCER_ADMIN_TOKEN";
/// Name of the admin token generated at the first start.
pub const BOOTSTRAP_TOKEN_NAME: &str = "bootstrap:admin";

/// Who is calling: the token's id, name, role and expiry, and the clusters it may see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// `None` for the server itself (scheduled runs).
    pub id: Option<i64>,
    pub name: String,
    pub role: Role,
    /// When the token stops working (ms since the epoch); `None`: never.
    pub expires_at: Option<i64>,
    /// The clusters this principal may see; `None`: every cluster. Tokens are not scoped to
    /// clusters yet, so every token's is `None`; the event stream already filters by it.
    pub clusters: Option<Vec<String>>,
}

impl Principal {
    /// The server acting on its own (schedules, change triggers).
    pub fn system(name: &str) -> Principal {
        Principal {
            id: None,
            name: name.to_string(),
            role: Role::Admin,
            expires_at: None,
            clusters: None,
        }
    }

    /// May this principal see what happens in `cluster`?
    pub fn sees(&self, cluster: &str) -> bool {
        self.clusters
            .as_ref()
            .is_none_or(|clusters| clusters.iter().any(|c| c == cluster))
    }

    /// May this principal call what needs `needed` ([`Role::grants`])?
    pub fn has(&self, needed: Role) -> bool {
        self.role.grants(needed)
    }
}

impl From<TokenRecord> for Principal {
    fn from(token: TokenRecord) -> Self {
        Principal {
            id: Some(token.id),
            name: token.name,
            role: token.role,
            expires_at: token.expires_at,
            clusters: None,
        }
    }
}

/// A new random token: `rb_` + 32 bytes from the operating system's generator, base64url.
pub fn generate_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// How a token is stored: sha256 of the whole token, hex.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// What a presented token turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub enum Authentication {
    /// A token of this principal, not expired.
    Valid(Principal),
    /// A token the server knows, named `name`, that stopped working at `expires_at` (ms).
    Expired { name: String, expires_at: i64 },
    /// No such token (never created, or deleted).
    Unknown,
}

/// Who a presented token stands for, if anyone, now.
pub async fn authenticate(store: &Store, token: &str) -> Result<Authentication, StoreError> {
    let Some(record) = store.token_by_hash(&hash_token(token)).await? else {
        return Ok(Authentication::Unknown);
    };
    Ok(match record.expires_at {
        Some(expires_at) if record.is_expired(now_ms()) => Authentication::Expired {
            name: record.name,
            expires_at,
        },
        _ => Authentication::Valid(Principal::from(record)),
    })
}

/// Names of tokens created over the API: 1–100 characters, ASCII letters, digits, spaces and
/// `-._@/`, not only spaces; `:` is reserved for the server's own tokens. Exactly
/// [`TOKEN_NAME_PATTERN`] with at most 100 characters, as the OpenAPI document says.
pub fn check_token_name(name: &str) -> Result<(), &'static str> {
    if name.trim().is_empty() || name.len() > 100 {
        return Err("must be 1 to 100 characters long and not blank");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b' ' | b'-' | b'.' | b'_' | b'@' | b'/'))
    {
        return Err("may only contain ASCII letters and digits, spaces and - . _ @ /");
    }
    Ok(())
}

/// [`check_token_name`] as a regular expression (the document's `pattern`; the length is its
/// `maxLength`): a character other than a space, anywhere.
pub const TOKEN_NAME_PATTERN: &str = "^ *[A-Za-z0-9._@/-][A-Za-z0-9 ._@/-]*$";

/// What [`bootstrap`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Bootstrap {
    /// `REBALANCER_ADMIN_TOKEN` is the admin token.
    FromEnvironment,
    /// No admin token existed: one was generated and printed.
    Generated,
    /// Tokens exist; nothing to do.
    Existing,
}

/// Make the configured admin token valid (or retire the previous one when the variable is no
/// longer set), and when no admin token exists (a first start, or the variable's token was the
/// only admin), generate an admin token and write it once to `out` (standard output at
/// start-up: never to the log, which may be shipped elsewhere).
pub async fn bootstrap(
    store: &Store,
    admin_token: Option<&Secret>,
    out: &mut (dyn std::io::Write + Send),
) -> anyhow::Result<Bootstrap> {
    let env_hash = admin_token.map(|t| hash_token(t.expose()));
    let env_token = env_hash.as_deref().map(|hash| NewToken {
        name: ENV_TOKEN_NAME,
        role: Role::Admin,
        hash,
        origin: TokenOrigin::Env,
        created_by: None,
        expires_at: None,
    });
    if let Some(secret) = admin_token
        && secret.expose().len() < 16
    {
        tracing::warn!(
            "REBALANCER_ADMIN_TOKEN is shorter than 16 characters: anyone who can reach the \
             API may guess it"
        );
    }
    if store.replace_env_token(env_token.as_ref()).await?.is_some() {
        return Ok(Bootstrap::FromEnvironment);
    }
    let secret = generate_token()
        .map_err(|e| anyhow::anyhow!("the operating system's random generator failed: {e}"))?;
    let created = store
        .insert_token_if_no_admin(&NewToken {
            name: BOOTSTRAP_TOKEN_NAME,
            role: Role::Admin,
            hash: &hash_token(&secret),
            origin: TokenOrigin::Bootstrap,
            created_by: None,
            expires_at: None,
        })
        .await?;
    if !created {
        return Ok(Bootstrap::Existing);
    }
    writeln!(
        out,
        "\nRebalancer created an admin API token. It is shown this once and stored only as a \
         hash:\n\n    REBALANCER_ADMIN_TOKEN={secret}\n\nUse it as `Authorization: Bearer \
         <token>`; create tokens for people and portals with POST /api/v1/tokens.\n"
    )?;
    out.flush()?;
    tracing::info!(
        token = BOOTSTRAP_TOKEN_NAME,
        "no admin API token existed: one was created and printed to standard output"
    );
    Ok(Bootstrap::Generated)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("auth.db")).await.unwrap();
        (dir, store)
    }

    /// The principal of a valid token.
    async fn valid(store: &Store, token: &str) -> Option<Principal> {
        match authenticate(store, token).await.unwrap() {
            Authentication::Valid(p) => Some(p),
            _ => None,
        }
    }

    #[test]
    fn tokens_are_random_prefixed_and_hashed() {
        let (a, b) = (generate_token().unwrap(), generate_token().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with("rb_"));
        assert_eq!(a.len(), 3 + 43, "{a}");
        assert_eq!(hash_token(&a).len(), 64);
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_ne!(hash_token(&a), hash_token(&b));
    }

    #[test]
    fn names() {
        for ok in ["ci", "Portal bot", "alice@example.com", "team/sre-1"] {
            assert!(check_token_name(ok).is_ok(), "{ok}");
        }
        // Only ASCII letters: the document's pattern means the same in every regex dialect.
        for bad in [
            "",
            "   ",
            "env:x",
            "a\nb",
            "a\tb",
            "Zoë",
            "\u{a0}",
            &"x".repeat(101),
        ] {
            assert!(check_token_name(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn first_start_prints_one_token_and_later_starts_print_none() {
        let (_dir, store) = open().await;
        let mut out = Vec::new();
        assert_eq!(
            bootstrap(&store, None, &mut out).await.unwrap(),
            Bootstrap::Generated
        );
        let text = String::from_utf8(out).unwrap();
        let token = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("REBALANCER_ADMIN_TOKEN="))
            .unwrap()
            .to_string();
        let principal = valid(&store, &token).await.unwrap();
        assert_eq!(
            (principal.name.as_str(), principal.role),
            (BOOTSTRAP_TOKEN_NAME, Role::Admin)
        );
        assert!(valid(&store, "rb_wrong").await.is_none());

        let mut again = Vec::new();
        assert_eq!(
            bootstrap(&store, None, &mut again).await.unwrap(),
            Bootstrap::Existing
        );
        assert!(again.is_empty());
        assert!(valid(&store, &token).await.is_some());
    }

    #[tokio::test]
    async fn the_environment_token_is_valid_while_set_and_replaced_when_changed() {
        let (_dir, store) = open().await;
        let mut out = Vec::new();
        let first = Secret::new("first-admin-token-value");
        assert_eq!(
            bootstrap(&store, Some(&first), &mut out).await.unwrap(),
            Bootstrap::FromEnvironment
        );
        assert!(
            out.is_empty(),
            "nothing is printed when the token is configured"
        );
        let principal = valid(&store, first.expose()).await.unwrap();
        assert_eq!(principal.role, Role::Admin);
        assert_eq!(principal.name, ENV_TOKEN_NAME);

        let second = Secret::new("second-admin-token-value");
        bootstrap(&store, Some(&second), &mut out).await.unwrap();
        assert!(valid(&store, first.expose()).await.is_none());
        assert!(valid(&store, second.expose()).await.is_some());

        // Unset: the variable's token stops working; with no admin left (a viewer does not
        // count), one is generated.
        let viewer = NewToken {
            name: "viewer",
            role: Role::Viewer,
            hash: "h-viewer",
            origin: TokenOrigin::Api,
            created_by: None,
            expires_at: None,
        };
        store.insert_token(&viewer).await.unwrap();
        assert_eq!(
            bootstrap(&store, None, &mut out).await.unwrap(),
            Bootstrap::Generated
        );
        assert!(valid(&store, second.expose()).await.is_none());
        let roles: Vec<Role> = store
            .list_tokens()
            .await
            .unwrap()
            .iter()
            .map(|t| t.role)
            .collect();
        assert_eq!(roles, [Role::Viewer, Role::Admin]);
    }

    #[tokio::test]
    async fn an_expired_token_is_known_but_not_valid_and_an_expired_admin_is_replaced() {
        let (_dir, store) = open().await;
        let mut out = Vec::new();
        let first = Secret::new("first-admin-token-value");
        bootstrap(&store, Some(&first), &mut out).await.unwrap();
        let expires_at = now_ms() - 1;
        store
            .insert_token(&NewToken {
                name: "old-admin",
                role: Role::Admin,
                hash: &hash_token("rb_old"),
                origin: TokenOrigin::Api,
                created_by: None,
                expires_at: Some(expires_at),
            })
            .await
            .unwrap();
        store
            .insert_token(&NewToken {
                name: "ci",
                role: Role::Operator,
                hash: &hash_token("rb_ci"),
                origin: TokenOrigin::Api,
                created_by: None,
                expires_at: Some(now_ms() + 60_000),
            })
            .await
            .unwrap();
        assert_eq!(
            authenticate(&store, "rb_old").await.unwrap(),
            Authentication::Expired {
                name: "old-admin".into(),
                expires_at
            }
        );
        let ci = valid(&store, "rb_ci").await.unwrap();
        assert_eq!(ci.role, Role::Operator);
        assert!(ci.has(Role::Operator) && ci.has(Role::Viewer));
        assert!(!ci.has(Role::Approver) && !ci.has(Role::Admin));

        // The variable unset: the expired admin does not count, so a new one is generated.
        let mut out = Vec::new();
        assert_eq!(
            bootstrap(&store, None, &mut out).await.unwrap(),
            Bootstrap::Generated
        );
        assert!(
            String::from_utf8(out)
                .unwrap()
                .contains("REBALANCER_ADMIN_TOKEN=rb_")
        );
    }
}
