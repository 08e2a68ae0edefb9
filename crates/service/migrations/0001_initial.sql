-- Ferry transfer service, schema version 1. Portable between SQLite and
-- PostgreSQL: TEXT, BIGINT and DOUBLE PRECISION only; times are Unix
-- milliseconds; identifiers are random text, so no sequences are needed.

CREATE TABLE tokens (
    token_hash TEXT PRIMARY KEY,          -- SHA-256 of the bearer token, hex
    username TEXT NOT NULL,
    admin BIGINT NOT NULL,
    created_ms BIGINT NOT NULL
);

CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    state TEXT NOT NULL,                  -- queued | active | done | partial | failed | canceled
    params TEXT NOT NULL,                 -- JSON of the checked parameters
    metadata TEXT,
    files_total BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    finished_ms BIGINT,
    reason TEXT
);
CREATE INDEX jobs_owner ON jobs (owner, created_ms);
CREATE INDEX jobs_state ON jobs (state, finished_ms);

CREATE TABLE files (
    job_id TEXT NOT NULL,
    idx BIGINT NOT NULL,
    owner TEXT NOT NULL,
    priority BIGINT NOT NULL,
    submitted_ms BIGINT NOT NULL,
    source TEXT NOT NULL,
    destination TEXT NOT NULL,
    link TEXT NOT NULL,
    src_se TEXT NOT NULL,
    dst_se TEXT NOT NULL,
    checksum TEXT,                        -- ALGO:value as given
    filesize BIGINT,
    metadata TEXT,
    activity TEXT NOT NULL,
    state TEXT NOT NULL,                  -- queued | active | done | failed | canceled
    attempts BIGINT NOT NULL DEFAULT 0,
    not_before_ms BIGINT NOT NULL DEFAULT 0,
    node TEXT,
    lease_id TEXT,
    lease_until_ms BIGINT,
    ranges TEXT NOT NULL DEFAULT '',      -- restart marker: byte ranges the destination holds
    ranges_size BIGINT,                   -- the source's size and mtime the ranges belong to
    ranges_mtime BIGINT,
    bytes BIGINT,
    started_ms BIGINT,
    finished_ms BIGINT,
    seconds DOUBLE PRECISION,
    verified TEXT,                        -- ALGO:value both ends agreed on
    reason TEXT,
    resumed BIGINT NOT NULL DEFAULT 0,
    takeovers BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, idx)
);
CREATE INDEX files_claim ON files (link, state, owner, priority DESC, submitted_ms, job_id, idx);
CREATE INDEX files_job_state ON files (job_id, state);
CREATE INDEX files_node ON files (node, state);
CREATE INDEX files_lease ON files (state, lease_until_ms);

-- One row per attempt that ended: the optimiser's success rate, the
-- dashboard's history.
CREATE TABLE attempts (
    id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL,
    idx BIGINT NOT NULL,
    link TEXT NOT NULL,
    node TEXT NOT NULL,
    finished_ms BIGINT NOT NULL,
    ok BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    seconds DOUBLE PRECISION NOT NULL,
    reason TEXT
);
CREATE INDEX attempts_link ON attempts (link, finished_ms);
CREATE INDEX attempts_job ON attempts (job_id, idx);

CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    started_ms BIGINT NOT NULL,
    heartbeat_ms BIGINT NOT NULL
);

CREATE TABLE links (
    link TEXT PRIMARY KEY,
    active_target BIGINT NOT NULL,
    streams BIGINT NOT NULL,
    ema DOUBLE PRECISION NOT NULL DEFAULT 0,
    bytes_seen BIGINT NOT NULL DEFAULT 0,
    decided_ms BIGINT NOT NULL DEFAULT 0,
    next_decision_ms BIGINT NOT NULL DEFAULT 0
);

-- Each node's running count of bytes moved on a link (its progress
-- counters, including transfers still running).
CREATE TABLE link_nodes (
    link TEXT NOT NULL,
    node TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (link, node)
);

CREATE TABLE decisions (
    id TEXT PRIMARY KEY,
    link TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    node TEXT NOT NULL,
    active BIGINT NOT NULL,
    streams BIGINT NOT NULL,
    throughput DOUBLE PRECISION NOT NULL,
    ema DOUBLE PRECISION NOT NULL,
    success_rate DOUBLE PRECISION,
    queued BIGINT NOT NULL,
    running BIGINT NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX decisions_link ON decisions (link, at_ms);

CREATE TABLE web_sessions (
    id_hash TEXT PRIMARY KEY,
    username TEXT NOT NULL,
    admin BIGINT NOT NULL,
    csrf TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);
