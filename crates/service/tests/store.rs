//! The store against both databases: jobs in one transaction, claims,
//! leases that expire and are taken over with their restart ranges,
//! results recorded once, early stop, purge, and SQL-significant text.

mod pg;

use ferry_service::auth::Principal;
use ferry_service::job;
use ferry_service::store::{ClaimLimits, Outcome, Store};
use std::time::Duration;

const LIM: ClaimLimits = ClaimLimits { max_active_per_endpoint: 100, default_active: 4, default_streams: 1 };

fn job_json(n: usize, name: &str) -> Vec<u8> {
    let files: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"sources": ["ftp://127.0.0.1:2811/{name}{i}"], "destinations": ["ftp://u@127.0.0.1:2812/{name}{i}"], "filesize": 10}}"#
            )
        })
        .collect();
    format!(r#"{{"files": [{}], "params": {{"retry": 1, "retry_delay": 1}}}}"#, files.join(",")).into_bytes()
}

fn alice() -> Principal {
    Principal { user: "alice".into(), admin: false }
}

async fn exercise(store: Store) {
    // SQL-significant characters everywhere are stored as given.
    let evil = "x'; DROP TABLE files; --\\\"";
    let checked = job::parse(&job_json(3, evil), 10).unwrap();
    let id = store.insert_job("alice", &checked).await.unwrap();
    let j = store.job(&alice(), &id).await.unwrap().unwrap();
    assert_eq!((j.state.as_str(), j.counts.queued), ("queued", 3));
    let files = store.files(&id, 0, 10).await.unwrap();
    assert!(files[0].source.contains("DROP TABLE files"), "{}", files[0].source);
    // Another user sees nothing; an admin sees it.
    assert!(store.job(&Principal { user: "bob".into(), admin: false }, &id).await.unwrap().is_none());
    assert!(store.job(&Principal { user: "root".into(), admin: true }, &id).await.unwrap().is_some());

    // Node A claims within the link's default of 4 active; records ranges.
    let link = store.links_with_work().await.unwrap().pop().unwrap();
    let a = store.claim("A", &link, Duration::from_millis(300), LIM).await.unwrap().unwrap();
    assert_eq!(a.attempts, 1);
    assert!(store.save_ranges(&a.job_id, a.idx, &a.lease_id, "0-5", 10, 7).await.unwrap());
    // Its lease runs out; another node returns it to the queue, ranges kept.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(store.expire_leases().await.unwrap(), 1);
    let b = store.claim("B", &link, Duration::from_secs(30), LIM).await.unwrap().unwrap();
    assert_eq!((b.job_id.as_str(), b.idx, b.ranges.as_str(), b.takeovers), (a.job_id.as_str(), a.idx, "0-5", 1));
    // A's late result is refused: the file is B's now.
    let done = Outcome::Done { bytes: 10, seconds: 1.0, verified: Some("ADLER32:1".into()), resumed: false };
    assert!(store.finish(&a, "A", &done).await.unwrap().is_none());
    assert!(store.finish(&b, "B", &done).await.unwrap().is_some());
    assert!(store.finish(&b, "B", &done).await.unwrap().is_none(), "recorded twice");
    // A retry waits for its delay, then fails for good after `retry`.
    let c = store.claim("B", &link, Duration::from_secs(30), LIM).await.unwrap().unwrap();
    let retry = Outcome::Retry { reason: "refused".into(), delay: Duration::from_millis(300), bytes: 0, seconds: 0.1 };
    store.finish(&c, "B", &retry).await.unwrap().unwrap();
    let d = store.claim("B", &link, Duration::from_secs(30), LIM).await.unwrap().unwrap();
    assert_ne!((d.job_id.clone(), d.idx), (c.job_id.clone(), c.idx), "claimed before its back-off");
    tokio::time::sleep(Duration::from_millis(350)).await;
    let c2 = store.claim("B", &link, Duration::from_secs(30), LIM).await.unwrap().unwrap();
    assert_eq!((c2.idx, c2.attempts), (c.idx, 2));
    store.finish(&c2, "B", &Outcome::Failed { reason: "no".into(), bytes: 0, seconds: 0.1 }).await.unwrap().unwrap();
    store.finish(&d, "B", &done).await.unwrap().unwrap();
    let j = store.job(&alice(), &id).await.unwrap().unwrap();
    assert_eq!((j.state.as_str(), j.counts.done, j.counts.failed), ("partial", 2, 1));

    // A job failing on most of its files stops early.
    let id2 = store.insert_job("alice", &job::parse(&job_json(20, "bad"), 100).unwrap()).await.unwrap();
    let lim = ClaimLimits { default_active: 50, ..LIM };
    for _ in 0..5 {
        let c = store.claim("A", &link, Duration::from_secs(30), lim).await.unwrap().unwrap();
        store.finish(&c, "A", &Outcome::Failed { reason: "550 refused".into(), bytes: 0, seconds: 0.1 }).await.unwrap();
    }
    let j = store.job(&alice(), &id2).await.unwrap().unwrap();
    assert_eq!((j.state.as_str(), j.counts.failed, j.counts.canceled), ("failed", 5, 15), "{:?}", j.reason);
    assert!(j.reason.unwrap().contains("stopped early"));

    // Cancel: waiting files at once; a running one when its node renews.
    let id3 = store.insert_job("alice", &job::parse(&job_json(3, "c"), 100).unwrap()).await.unwrap();
    let run = store.claim("A", &link, Duration::from_secs(30), lim).await.unwrap().unwrap();
    let running = [run.lease_id.clone()];
    assert_eq!(store.heartbeat("A", Duration::from_secs(30), &running, &[(link.clone(), 5)]).await.unwrap().len(), 1);
    assert_eq!(store.cancel_job(&id3).await.unwrap(), "canceled");
    assert!(store.heartbeat("A", Duration::from_secs(30), &running, &[]).await.unwrap().is_empty());
    assert!(store.finish(&run, "A", &done).await.unwrap().is_none());
    assert_eq!(store.retry_job(&id3).await.unwrap(), 3);

    // Tokens are stored hashed and map to their user.
    let t = store.add_token("carol", true).await.unwrap();
    assert_eq!(store.principal(&t).await.unwrap(), Some(Principal { user: "carol".into(), admin: true }));
    assert_eq!(store.principal("fy_nope").await.unwrap(), None);

    // Purge removes finished jobs only.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.purge(Duration::from_millis(5)).await.unwrap(), 2);
    assert!(store.job(&alice(), &id).await.unwrap().is_none());
    assert!(store.job(&alice(), &id3).await.unwrap().is_some());
}

/// 100,000 files go in as one job, in one transaction.
async fn big_job(store: Store) {
    let (j0, f0) = store.row_counts().await.unwrap();
    let body = job_json(job::DEFAULT_MAX_FILES, "big");
    let checked = job::parse(&body, job::DEFAULT_MAX_FILES).unwrap();
    store.insert_job("alice", &checked).await.unwrap();
    let (j1, f1) = store.row_counts().await.unwrap();
    assert_eq!((j1 - j0, f1 - f0), (1, job::DEFAULT_MAX_FILES as i64));
}

/// Users share a link by how much each runs now; endpoints cap the total.
#[tokio::test]
async fn fair_share_and_endpoint_limits() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(&format!("sqlite:{}", dir.path().join("f.db").display())).await.unwrap();
    store.insert_job("alice", &job::parse(&job_json(10, "a"), 100).unwrap()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    store.insert_job("bob", &job::parse(&job_json(2, "b"), 100).unwrap()).await.unwrap();
    let link = store.links_with_work().await.unwrap().pop().unwrap();
    let lim = ClaimLimits { max_active_per_endpoint: 4, default_active: 10, default_streams: 1 };
    let mut owners = Vec::new();
    while let Some(c) = store.claim("A", &link, Duration::from_secs(30), lim).await.unwrap() {
        owners.push(c.owner);
    }
    // Bob's later job is not starved behind alice's ten files, and the
    // endpoints' limit of four stops the claims although the link allows ten.
    assert_eq!(owners, ["alice", "bob", "alice", "bob"]);
}

#[tokio::test]
async fn sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("s.db").display());
    exercise(Store::connect(&url).await.unwrap()).await;
    // Migrations are idempotent: a second connect (a restart) works.
    big_job(Store::connect(&url).await.unwrap()).await;
}

#[tokio::test]
async fn postgres_store() {
    let pg = pg::Postgres::start();
    exercise(Store::connect(&pg.url()).await.unwrap()).await;
    big_job(Store::connect(&pg.url()).await.unwrap()).await;
}

/// A job that fails inside the database half-way leaves nothing behind.
#[tokio::test]
async fn postgres_job_is_all_or_nothing() {
    let pg = pg::Postgres::start();
    let store = Store::connect(&pg.url()).await.unwrap();
    let mut checked = job::parse(&job_json(3000, "half"), 10_000).unwrap();
    // PostgreSQL refuses NUL in text: the 2,700th row fails after 2,500
    // were inserted in earlier statements.
    checked.files[2700].activity = "nul\0".into();
    assert!(store.insert_job("alice", &checked).await.is_err());
    assert_eq!(store.row_counts().await.unwrap(), (0, 0));
}
