-- The live change feed (issue #24, item 5): a transactional outbox. Every change the API's
-- event stream (`GET /api/v1/events`) announces is appended here in the same transaction as the
-- change itself, so a reader never sees an event of a change that was rolled back, nor misses
-- one that was committed, whichever replica made it. AUTOINCREMENT: an id is never reused after
-- retention deleted the rows before it, so `Last-Event-ID` resumes are unambiguous.
--
-- type: `run`, `decisions`, `migration` or `cluster`; cluster: the cluster it concerns (the
-- stream hides events of clusters a token may not see); data: the event's JSON payload.
CREATE TABLE events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    time    INTEGER NOT NULL,
    type    TEXT    NOT NULL,
    cluster TEXT,
    data    TEXT    NOT NULL
);
CREATE INDEX events_by_time ON events (time);

-- Settings changed at run time over the API, overriding the command line's defaults (e.g.
-- `retention`: the keep times of PUT /api/v1/retention). value: JSON.
CREATE TABLE settings (
    key        TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);
