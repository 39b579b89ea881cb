//! `GET /api/v1/whoami`: who the bearer token is and what it may do, so a client shows only
//! what the role may use.
//!
//! Owns: the answer's shape and [`CAPABILITIES`], which names for each capability the one route
//! of `auth::ROUTE_ACCESS` it stands for.
//! Must not: state a rule of its own: every `can` flag is what the authorization middleware
//! would decide for its route.

use axum::Json;
use axum::http::Method;
use serde::Serialize;

use super::auth::{Access, Actor, route_access};
use super::timestamp;
use rebalancer_store::Role;

/// What the calling token is.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WhoAmI {
    /// The token's name.
    #[schema(example = "ci-pipeline")]
    pub name: String,
    pub role: Role,
    /// The clusters the token may see; null: every cluster (tokens are not scoped to clusters
    /// yet, so this is null).
    pub clusters: Option<Vec<String>>,
    /// When the token stops working (RFC 3339); null: never.
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    pub can: Capabilities,
}

/// What the token may do, each flag what the server would decide for the route it stands for.
#[derive(Debug, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Capabilities {
    /// Read clusters, runs, decisions, pod migrations… (`GET /api/v1/clusters`).
    pub read: bool,
    /// Approve and reject decisions (`POST /api/v1/decisions/{id}/approve`).
    pub approve: bool,
    /// Start runs (`POST /api/v1/runs`).
    pub run: bool,
    /// Abort pod migrations (`POST /api/v1/pod-migrations/{id}/abort`).
    pub abort: bool,
    /// Administer: tokens, policies, profiles, arbitration, retention (`POST /api/v1/tokens`).
    pub admin: bool,
}

/// Which route each capability stands for (rows of `auth::ROUTE_ACCESS`).
pub const CAPABILITIES: [(&str, Method, &str); 5] = [
    ("read", Method::GET, "/api/v1/clusters"),
    ("approve", Method::POST, "/api/v1/decisions/{id}/approve"),
    ("run", Method::POST, "/api/v1/runs"),
    ("abort", Method::POST, "/api/v1/pod-migrations/{id}/abort"),
    ("admin", Method::POST, "/api/v1/tokens"),
];

impl Capabilities {
    /// What `role` may do, by the access table.
    pub fn of(role: Role) -> Capabilities {
        let may = |name: &str| {
            let (_, method, route) = CAPABILITIES
                .iter()
                .find(|(n, _, _)| *n == name)
                .expect("every capability has a row in CAPABILITIES");
            match route_access(method, route) {
                Some(Access::Public) => true,
                Some(Access::Role(needed)) => role.grants(needed),
                // A capability whose route is gone from the table grants nothing (a unit test
                // keeps them in step).
                None => false,
            }
        };
        Capabilities {
            read: may("read"),
            approve: may("approve"),
            run: may("run"),
            abort: may("abort"),
            admin: may("admin"),
        }
    }
}

/// The calling token: its name, role, expiry, the clusters it may see, and what it may do.
#[utoipa::path(get, path = "/api/v1/whoami", tag = "tokens",
    responses((status = 200, description = "The calling token", body = WhoAmI)))]
pub async fn whoami(actor: Actor) -> Json<WhoAmI> {
    let principal = actor.0;
    Json(WhoAmI {
        can: Capabilities::of(principal.role),
        expires_at: principal.expires_at.map(timestamp),
        clusters: principal.clusters,
        name: principal.name,
        role: principal.role,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_capability_stands_for_a_route_of_the_table() {
        for (name, method, route) in CAPABILITIES {
            assert!(
                route_access(&method, route).is_some(),
                "capability {name}: {method} {route} has no row in auth::ROUTE_ACCESS"
            );
        }
    }

    #[test]
    fn capabilities_per_role() {
        let flags = |c: Capabilities| [c.read, c.approve, c.run, c.abort, c.admin];
        assert_eq!(
            flags(Capabilities::of(Role::Viewer)),
            [true, false, false, false, false]
        );
        assert_eq!(
            flags(Capabilities::of(Role::Approver)),
            [true, true, false, true, false]
        );
        assert_eq!(
            flags(Capabilities::of(Role::Operator)),
            [true, false, true, false, false]
        );
        assert_eq!(flags(Capabilities::of(Role::Admin)), [true; 5]);
    }
}
