-- Retention: history is deleted by explicit rules (`--retain-*`, see docs/operations.md) by the
-- server's pruning task, a batch at a time. Never edit this file once it has been released: add
-- a new numbered file instead.
--
-- Timestamps are INTEGER milliseconds since the Unix epoch (UTC).

-- How many of a run's decisions retention deleted, and when the last of those it may delete went
-- (NULL while some are left, or none was due yet). The run itself stays longer than its
-- decisions, so that `GET /api/v1/runs/{id}` can say what became of them.
ALTER TABLE runs ADD COLUMN decisions_pruned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN decisions_pruned_at INTEGER;

-- The runs whose proposals may still be due: few (a day of runs or so), however long runs are kept.
CREATE INDEX runs_proposals_unpruned ON runs (finished_at) WHERE decisions_pruned_at IS NULL;
CREATE INDEX runs_by_finish ON runs (finished_at);
CREATE INDEX pod_migrations_by_finish ON pod_migrations (finished_at)
    WHERE finished_at IS NOT NULL;
CREATE INDEX simulated_events_by_time ON simulated_events (time_ms);

-- The audit log stays append-only for every change but one: retention deletes its oldest entries.
-- An entry can be deleted only when no older entry is left (history is cut from its start, never
-- from its middle) and only once it is a day old (so `DELETE FROM audit_log` still fails).
DROP TRIGGER audit_log_no_delete;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN OLD.at > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) - 86400000
  OR EXISTS (SELECT 1 FROM audit_log WHERE id < OLD.id)
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only: only retention deletes entries, the oldest first, once they are a day old');
END;
