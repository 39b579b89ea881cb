//! API tokens: name, role, optional expiry and the sha256 of the secret (never the secret itself).

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{Store, StoreError, now_ms};

/// What a token may do. Not a ladder: `approver` and `operator` each add their own routes to
/// what `viewer` may, and `admin` may do everything ([`Role::grants`]). An operator (a CI job,
/// a cron push) cannot approve what its runs propose, and an approver cannot start runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read everything (`GET`), except the token list.
    Viewer,
    /// Viewer, plus approve/reject decisions and abort pod migrations.
    Approver,
    /// Viewer, plus push snapshots, start runs and manage schedules.
    Operator,
    /// Everything: also tokens, policies, profiles, arbitration, auto-approve rules, clusters.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Approver, Role::Operator, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Approver => "approver",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// May a token of this role call a route that needs `needed`? Admin may call everything;
    /// every role may call what viewers may; otherwise only the role itself.
    pub fn grants(self, needed: Role) -> bool {
        self == Role::Admin || needed == Role::Viewer || self == needed
    }

    /// The roles that may call a route that needs `needed`, in [`Role::ALL`] order.
    pub fn holders(needed: Role) -> impl Iterator<Item = Role> {
        Role::ALL.into_iter().filter(move |r| r.grants(needed))
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| StoreError::corrupt("token role", format!("`{s}`")))
    }
}

/// Where a token came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenOrigin {
    /// `POST /api/v1/tokens`.
    Api,
    /// Generated at the first start and printed once.
    Bootstrap,
    /// `REBALANCER_ADMIN_TOKEN`.
    Env,
}

impl TokenOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenOrigin::Api => "api",
            TokenOrigin::Bootstrap => "bootstrap",
            TokenOrigin::Env => "env",
        }
    }
}

impl FromStr for TokenOrigin {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "api" => Ok(TokenOrigin::Api),
            "bootstrap" => Ok(TokenOrigin::Bootstrap),
            "env" => Ok(TokenOrigin::Env),
            other => Err(StoreError::corrupt("token origin", format!("`{other}`"))),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRecord {
    pub id: i64,
    pub name: String,
    pub role: Role,
    pub origin: TokenOrigin,
    pub created_by: Option<String>,
    pub created_at: i64,
    /// From this instant on the token is refused; `None`: never.
    pub expires_at: Option<i64>,
}

impl TokenRecord {
    /// Has the token expired at `now` (ms)?
    pub fn is_expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// Why a token was not created.
#[derive(Debug, thiserror::Error)]
pub enum InsertTokenError {
    #[error("a token named \"{0}\" already exists")]
    NameTaken(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for InsertTokenError {
    fn from(e: sqlx::Error) -> Self {
        InsertTokenError::Store(e.into())
    }
}

/// Why a token was not deleted.
#[derive(Debug, thiserror::Error)]
pub enum DeleteTokenError {
    #[error("this token is REBALANCER_ADMIN_TOKEN")]
    FromEnvironment,
    #[error("this is the last admin token")]
    LastAdmin,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for DeleteTokenError {
    fn from(e: sqlx::Error) -> Self {
        DeleteTokenError::Store(e.into())
    }
}

/// A token to store.
#[derive(Clone, Copy, Debug)]
pub struct NewToken<'a> {
    pub name: &'a str,
    pub role: Role,
    /// sha256 of the secret, hex.
    pub hash: &'a str,
    pub origin: TokenOrigin,
    pub created_by: Option<&'a str>,
    /// When it stops working (ms); `None`: never.
    pub expires_at: Option<i64>,
}

const COLUMNS: &str = "id, name, role, origin, created_by, created_at, expires_at";

fn token_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<TokenRecord, StoreError> {
    Ok(TokenRecord {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        role: row.try_get::<String, _>("role")?.parse()?,
        origin: row.try_get::<String, _>("origin")?.parse()?,
        created_by: row.try_get("created_by")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
    })
}

impl Store {
    pub async fn insert_token(
        &self,
        token: &NewToken<'_>,
    ) -> Result<TokenRecord, InsertTokenError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let taken: Option<i64> = sqlx::query_scalar("SELECT id FROM api_tokens WHERE name = ?")
            .bind(token.name)
            .fetch_optional(&mut *tx)
            .await?;
        if taken.is_some() {
            return Err(InsertTokenError::NameTaken(token.name.to_string()));
        }
        let row = insert(&mut tx, token).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// The token whose secret hashes to `hash`.
    pub async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM api_tokens WHERE token_hash = ?"
        )))
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(token_from_row).transpose()
    }

    /// Every token, oldest first.
    pub async fn list_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM api_tokens ORDER BY id"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(token_from_row).collect()
    }

    pub async fn get_token(&self, id: i64) -> Result<TokenRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM api_tokens WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("token {id}"),
        })?;
        token_from_row(&row)
    }

    /// Delete a token; it stops working at once. Returns what was deleted. The token of
    /// `REBALANCER_ADMIN_TOKEN` and the last admin token cannot be deleted.
    pub async fn delete_token(&self, id: i64) -> Result<TokenRecord, DeleteTokenError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM api_tokens WHERE id = ?"
        )))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("token {id}"),
        })?;
        let token = token_from_row(&row)?;
        if token.origin == TokenOrigin::Env {
            return Err(DeleteTokenError::FromEnvironment);
        }
        // An expired admin token may always go; a working one only while another works.
        let now = now_ms();
        if token.role == Role::Admin && !token.is_expired(now) {
            let others: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM api_tokens WHERE role = 'admin' AND id != ? \
                 AND (expires_at IS NULL OR expires_at > ?)",
            )
            .bind(id)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            if others == 0 {
                return Err(DeleteTokenError::LastAdmin);
            }
        }
        sqlx::query("DELETE FROM api_tokens WHERE id = ?")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(token)
    }

    /// Make `token` (origin `env`) the only token of that origin: the previous value of the
    /// variable stops working. `None` removes it (the variable is no longer set).
    pub async fn replace_env_token(
        &self,
        token: Option<&NewToken<'_>>,
    ) -> Result<Option<TokenRecord>, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query("DELETE FROM api_tokens WHERE origin = 'env'")
            .execute(&mut *tx)
            .await?;
        let record = match token {
            Some(token) => {
                // Should a token with the same secret or name exist, the variable wins.
                sqlx::query("DELETE FROM api_tokens WHERE token_hash = ? OR name = ?")
                    .bind(token.hash)
                    .bind(token.name)
                    .execute(&mut *tx)
                    .await?;
                Some(insert(&mut tx, token).await?)
            }
            None => None,
        };
        tx.commit().await?;
        Ok(record)
    }

    /// Store `token` when no admin token works (none exists, or every one has expired).
    /// Returns whether it was stored.
    pub async fn insert_token_if_no_admin(&self, token: &NewToken<'_>) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let any: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM api_tokens WHERE role = 'admin' \
             AND (expires_at IS NULL OR expires_at > ?) LIMIT 1",
        )
        .bind(now_ms())
        .fetch_optional(&mut *tx)
        .await?;
        if any.is_some() {
            return Ok(false);
        }
        insert(&mut tx, token).await?;
        tx.commit().await?;
        Ok(true)
    }
}

async fn insert(
    tx: &mut sqlx::SqliteConnection,
    token: &NewToken<'_>,
) -> Result<TokenRecord, StoreError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO api_tokens (name, role, token_hash, origin, created_by, created_at, \
         expires_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {COLUMNS}"
    )))
    .bind(token.name)
    .bind(token.role.as_str())
    .bind(token.hash)
    .bind(token.origin.as_str())
    .bind(token.created_by)
    .bind(now_ms())
    .bind(token.expires_at)
    .fetch_one(&mut *tx)
    .await?;
    token_from_row(&row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token<'a>(name: &'a str, role: Role, hash: &'a str) -> NewToken<'a> {
        NewToken {
            name,
            role,
            hash,
            origin: TokenOrigin::Api,
            created_by: Some("test"),
            expires_at: None,
        }
    }

    #[tokio::test]
    async fn tokens_are_unique_and_the_last_admin_and_the_environment_token_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("tokens.db")).await.unwrap();
        let admin = store
            .insert_token(&token("a", Role::Admin, "h-a"))
            .await
            .unwrap();
        let viewer = store
            .insert_token(&token("v", Role::Viewer, "h-v"))
            .await
            .unwrap();
        assert!(matches!(
            store.insert_token(&token("a", Role::Viewer, "h-x")).await,
            Err(InsertTokenError::NameTaken(name)) if name == "a"
        ));
        assert_eq!(
            store.token_by_hash("h-v").await.unwrap(),
            Some(viewer.clone())
        );
        assert!(matches!(
            store.delete_token(admin.id).await,
            Err(DeleteTokenError::LastAdmin)
        ));
        assert_eq!(store.delete_token(viewer.id).await.unwrap(), viewer);
        assert!(store.token_by_hash("h-v").await.unwrap().is_none());
        assert!(matches!(
            store.delete_token(viewer.id).await,
            Err(DeleteTokenError::Store(StoreError::NotFound { .. }))
        ));

        let env = NewToken {
            origin: TokenOrigin::Env,
            created_by: None,
            ..token("env", Role::Admin, "h-env")
        };
        let env = store.replace_env_token(Some(&env)).await.unwrap().unwrap();
        assert!(matches!(
            store.delete_token(env.id).await,
            Err(DeleteTokenError::FromEnvironment)
        ));
        // Two admins now: the first one may go.
        store.delete_token(admin.id).await.unwrap();
        assert!(
            !store
                .insert_token_if_no_admin(&token("b", Role::Admin, "h-b"))
                .await
                .unwrap()
        );
        assert_eq!(store.list_tokens().await.unwrap(), [env]);
    }

    #[test]
    fn roles_are_not_a_ladder() {
        use Role::*;
        // (role, needed, granted)
        let table = [
            (Viewer, Viewer, true),
            (Viewer, Approver, false),
            (Viewer, Operator, false),
            (Approver, Viewer, true),
            (Approver, Approver, true),
            (Approver, Operator, false),
            (Approver, Admin, false),
            (Operator, Viewer, true),
            (Operator, Approver, false),
            (Operator, Operator, true),
            (Operator, Admin, false),
            (Admin, Approver, true),
            (Admin, Operator, true),
            (Admin, Admin, true),
        ];
        for (role, needed, granted) in table {
            assert_eq!(role.grants(needed), granted, "{role} for {needed}");
        }
        let holders: Vec<Role> = Role::holders(Operator).collect();
        assert_eq!(holders, [Operator, Admin]);
        assert_eq!(Role::holders(Viewer).count(), 4);
        assert_eq!("operator".parse::<Role>().unwrap(), Operator);
    }

    #[tokio::test]
    async fn expiry_is_stored_and_an_expired_admin_does_not_count() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("expiry.db")).await.unwrap();
        let now = now_ms();
        let working = store
            .insert_token(&token("working", Role::Admin, "h-w"))
            .await
            .unwrap();
        let expired = store
            .insert_token(&NewToken {
                expires_at: Some(now - 1),
                ..token("expired", Role::Admin, "h-e")
            })
            .await
            .unwrap();
        let later = store
            .insert_token(&NewToken {
                expires_at: Some(now + 3_600_000),
                ..token("ci", Role::Operator, "h-ci")
            })
            .await
            .unwrap();
        assert_eq!(later.expires_at, Some(now + 3_600_000));
        assert_eq!(later.role, Role::Operator);
        assert!(expired.is_expired(now) && !later.is_expired(now) && !working.is_expired(now));
        assert_eq!(store.token_by_hash("h-e").await.unwrap(), Some(expired));

        // The expired admin does not keep the working one deletable…
        assert!(matches!(
            store.delete_token(working.id).await,
            Err(DeleteTokenError::LastAdmin)
        ));
        // …nor stop the start-up from making a new admin once no working one is left.
        assert!(
            !store
                .insert_token_if_no_admin(&token("b1", Role::Admin, "h-b1"))
                .await
                .unwrap()
        );
        sqlx::query("UPDATE api_tokens SET expires_at = ? WHERE id = ?")
            .bind(now - 1)
            .bind(working.id)
            .execute(store.pool())
            .await
            .unwrap();
        assert!(
            store
                .insert_token_if_no_admin(&token("b2", Role::Admin, "h-b2"))
                .await
                .unwrap()
        );
        // An expired admin token may always be deleted.
        store.delete_token(working.id).await.unwrap();
    }
}
