-- Run logs apart from run reports: what each policy of a run logged. Never edit this file once it
-- has been released: add a new numbered file instead.
--
-- A report with its policies' logs is tens of KB (a nine-plugin run's ~48 KB, ~45 KB of it logs),
-- and runs are kept for weeks after their proposals, while the logs explain those proposals
-- and go with them (retention). Kept inline, a report rewritten without its logs still holds a
-- database page of its own; kept here, the logs' rows are deleted whole and their pages reused.
-- Reports written before this migration keep their logs inline until retention strips them.

-- `logs`: a JSON array with, for each entry of the report's `policies` in order, that policy's
-- `logs` array. Only runs whose policies logged something have a row.
CREATE TABLE run_logs (
    run_id INTEGER PRIMARY KEY REFERENCES runs (id),
    logs   TEXT    NOT NULL
);
