/**
 * The control plane's schema, as the migrations that build it. Migration N takes a database at
 * `user_version` N-1 to N; they run in order, each in its own transaction, so a crash halfway
 * through leaves the database at the last whole version. Never edit a released migration: add
 * the next one.
 */

export interface Migration {
  /** The `user_version` the database has once this migration ran. */
  version: number
  /** What it does, for the error when it fails. */
  what: string
  sql: string
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    what: 'tenants, keys, settings and image names',
    sql: `
      CREATE TABLE settings (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
      ) STRICT;
      CREATE TABLE tenants (
        name               TEXT PRIMARY KEY,
        max_sandboxes      INTEGER NOT NULL,
        creates_per_second REAL NOT NULL,
        create_burst       REAL NOT NULL
      ) STRICT;
      -- Only a sha256 of each key's secret is kept: the secret is shown once, when it is made.
      CREATE TABLE api_keys (
        id         TEXT PRIMARY KEY,
        tenant     TEXT NOT NULL REFERENCES tenants (name),
        scopes     TEXT NOT NULL,
        hash       TEXT NOT NULL,
        created_at TEXT NOT NULL
      ) STRICT;
      CREATE INDEX api_keys_by_tenant ON api_keys (tenant);
      CREATE TABLE image_tags (
        name      TEXT PRIMARY KEY,
        digest    TEXT NOT NULL,
        kind      TEXT NOT NULL,
        tagged_at TEXT NOT NULL
      ) STRICT;
      -- Earlier digests of a tag; seq grows with each retag, so newest first is ORDER BY seq DESC.
      CREATE TABLE image_history (
        name      TEXT NOT NULL REFERENCES image_tags (name),
        seq       INTEGER NOT NULL,
        digest    TEXT NOT NULL,
        tagged_at TEXT NOT NULL,
        PRIMARY KEY (name, seq)
      ) STRICT;
    `
  },
  {
    version: 2,
    what: 'the kind of each layer in the blob store',
    sql: `
      -- A layer's kind (base, workspace, tools), recorded when it is pushed or first tagged, so
      -- a create naming it by digest is checked as one naming it by name.
      CREATE TABLE layer_kinds (
        digest      TEXT PRIMARY KEY,
        kind        TEXT NOT NULL,
        recorded_at TEXT NOT NULL
      ) STRICT;
    `
  },
  {
    version: 3,
    what: 'snapshots of sandboxes',
    sql: `
      -- A sandbox's file system as a layer stack (layers: JSON list, bottom first) and the spec a
      -- sandbox made from it starts with (JSON). A deleted snapshot keeps its row (deleted_at set)
      -- until the garbage collector has removed the layers only it held.
      CREATE TABLE snapshots (
        id         TEXT PRIMARY KEY,
        tenant     TEXT NOT NULL,
        name       TEXT,
        sandbox_id TEXT NOT NULL,
        backend    TEXT NOT NULL,
        layers     TEXT NOT NULL,
        spec       TEXT NOT NULL,
        bytes      INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        parent     TEXT,
        deleted_at INTEGER
      ) STRICT;
      -- A name is unique among a tenant's live snapshots; a deleted one gives its name up.
      CREATE UNIQUE INDEX snapshots_by_name ON snapshots (tenant, name) WHERE name IS NOT NULL AND deleted_at IS NULL;
      CREATE INDEX snapshots_by_tenant ON snapshots (tenant, created_at);
      CREATE INDEX snapshots_deleted ON snapshots (deleted_at) WHERE deleted_at IS NOT NULL;
    `
  },
  {
    version: 4,
    what: 'trajectories',
    sql: `
      -- One row per sandbox whose steps were recorded; header is the TrajectoryHeader as msgpack.
      -- end_seq is how many steps it recorded in all, once it ended; complete once they are all here.
      CREATE TABLE trajectories (
        sandbox_id TEXT PRIMARY KEY,
        tenant     TEXT NOT NULL,
        header     BLOB NOT NULL,
        created_at INTEGER NOT NULL,
        ended_at   INTEGER,
        end_seq    INTEGER,
        complete   INTEGER NOT NULL DEFAULT 0
      ) STRICT;
      CREATE INDEX trajectories_by_end ON trajectories (ended_at);
      -- body is the Step as msgpack; rev orders the records of one step (begun 0, final 1): the
      -- later one wins, a record sent again never undoes a newer one.
      CREATE TABLE trajectory_steps (
        sandbox_id TEXT NOT NULL,
        seq        INTEGER NOT NULL,
        rev        INTEGER NOT NULL,
        kind       TEXT NOT NULL,
        at         INTEGER NOT NULL,
        body       BLOB NOT NULL,
        PRIMARY KEY (sandbox_id, seq)
      ) STRICT, WITHOUT ROWID;
      -- The record blobs (blob store digests) each trajectory's steps reference, so a sweep deletes
      -- a blob once no trajectory references it, and a read is allowed only of a referenced one.
      CREATE TABLE trajectory_blobs (
        digest     TEXT NOT NULL,
        sandbox_id TEXT NOT NULL,
        PRIMARY KEY (digest, sandbox_id)
      ) STRICT, WITHOUT ROWID;
      CREATE INDEX trajectory_blobs_by_sandbox ON trajectory_blobs (sandbox_id);
    `
  },
  {
    version: 5,
    what: 'hibernated sandboxes',
    sql: `
      -- A hibernated sandbox is on no node: nodes cannot report it after a restart, so its
      -- directory record (JSON) is kept here until it resumes, is killed or its TTL ends.
      CREATE TABLE hibernated (
        id             TEXT PRIMARY KEY,
        tenant         TEXT NOT NULL,
        record         TEXT NOT NULL,
        hibernated_at  INTEGER NOT NULL
      ) STRICT;
    `
  },
  {
    version: 6,
    what: 'expiry and last use of API keys',
    sql: `
      -- expires_at: ms since the epoch after which the key is refused (NULL: never). last_used_at:
      -- when it last authenticated, written at most once an hour a key (IamDefaults), so logins
      -- stay free of disk writes.
      ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
      ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
    `
  },
  {
    version: 7,
    what: 'request rate quotas of tenants',
    sql: `
      -- Requests of every type a tenant's sessions may send a second (a token bucket), and its
      -- burst. Existing tenants get the defaults of QuotaDefaults.
      ALTER TABLE tenants ADD COLUMN requests_per_second REAL NOT NULL DEFAULT 10000;
      ALTER TABLE tenants ADD COLUMN request_burst REAL NOT NULL DEFAULT 20000;
    `
  },
  {
    version: 8,
    what: 'stored bytes of trajectories, a quota on them per tenant',
    sql: `
      -- bytes: what a trajectory holds, its steps as stored here and the record blobs they put in
      -- the blob store, kept as its steps are stored, so a tenant's total is known without a scan.
      -- Trajectories stored before this count their steps (their blobs are bounded per sandbox).
      ALTER TABLE trajectories ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
      UPDATE trajectories SET bytes = (SELECT coalesce(sum(length(body)), 0) FROM trajectory_steps s WHERE s.sandbox_id = trajectories.sandbox_id);
      -- A tenant over its quota loses its oldest ended trajectories first.
      CREATE INDEX trajectories_by_tenant_end ON trajectories (tenant, ended_at);
      ALTER TABLE tenants ADD COLUMN trajectory_bytes INTEGER NOT NULL DEFAULT 68719476736;
    `
  }
]

/** The version a database has once every migration here ran. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version
