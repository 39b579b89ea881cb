-- Webhooks for portals (issue #25, item 4): hooks, their deliveries, and how far the
-- dispatcher has read the change feed (`events`, 0012).
--
-- A hook's secret is kept as given: it signs every delivery (HMAC-SHA256), so it cannot be
-- stored hashed like an API token. It is never returned by the API.
-- events: the JSON array of event names the hook receives (`["*"]`: every one).
-- consecutive_failures: deliveries in a row that failed for good; at the server's limit the
-- hook is disabled (enabled = 0, disabled_reason set) until an admin enables it again.
-- last_status: `delivered` or `failed`, the outcome of its last finished delivery.
CREATE TABLE webhooks (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    url                  TEXT    NOT NULL,
    events               TEXT    NOT NULL,
    secret               TEXT    NOT NULL,
    description          TEXT    NOT NULL DEFAULT '',
    enabled              INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    disabled_reason      TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    created_at           INTEGER NOT NULL,
    created_by           TEXT    NOT NULL,
    last_delivery_at     INTEGER,
    last_status          TEXT CHECK (last_status IN ('delivered', 'failed'))
);

-- One delivery of one event to one hook. id: a UUID, the same on every attempt (receivers
-- dedupe on it); seq orders the deliveries (newest first in the API, and its cursor).
-- body: the exact JSON sent (built once, so every attempt carries the same bytes).
-- next_attempt_at: when a pending delivery is due; while an attempt is under way it is moved
-- past the attempt's timeout, so a delivery whose sender died is attempted again then.
-- Deleting a hook deletes its deliveries, pending ones included.
CREATE TABLE webhook_deliveries (
    seq                  INTEGER PRIMARY KEY AUTOINCREMENT,
    id                   TEXT    NOT NULL UNIQUE,
    webhook_id           INTEGER NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event                TEXT    NOT NULL,
    body                 TEXT    NOT NULL,
    status               TEXT    NOT NULL DEFAULT 'pending'
                                 CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts             INTEGER NOT NULL DEFAULT 0,
    next_attempt_at      INTEGER,
    last_attempt_at      INTEGER,
    last_response_status INTEGER,
    last_error           TEXT,
    created_at           INTEGER NOT NULL,
    delivered_at         INTEGER,
    finished_at          INTEGER
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_hook ON webhook_deliveries (webhook_id, seq);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at)
    WHERE status <> 'pending';

-- The id of the last change-feed event the dispatcher turned into deliveries: advanced in the
-- transaction that inserts them, so an event is dispatched exactly once across restarts. It
-- starts at the feed's end: hooks are told of changes made after this version.
CREATE TABLE webhook_cursor (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    last_event INTEGER NOT NULL
);
INSERT INTO webhook_cursor (id, last_event)
    VALUES (1, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0));
