//! The HTTP JSON API (`/api/v1/...`) and `/metrics`.
//!
//! | method and path | what |
//! |---|---|
//! | `POST /api/v1/jobs` | submit a job (FTS3-shaped JSON); `201 {"job_id": ...}` |
//! | `GET /api/v1/jobs` | the caller's jobs (an admin's: everyone's), newest first |
//! | `GET /api/v1/jobs/{id}?files=N&offset=K` | one job with its counts and up to N files |
//! | `DELETE /api/v1/jobs/{id}` | cancel |
//! | `POST /api/v1/jobs/{id}/retry` | queue its failed and canceled files again |
//! | `GET /api/v1/links` | each link's optimiser setting and its latest decisions |
//! | `GET /api/v1/whoami` | the token's user |
//! | `GET /metrics` | Prometheus |
//!
//! Every error is JSON `{"error": "..."}` with a 4xx that says whose fault
//! it is: 400 bad JSON or fields, 401 no or unknown token, 404 a job that
//! does not exist *or belongs to another user* (the two are not told
//! apart, so job ids cannot be probed), 409 a job already finished, 413 too
//! many files or too large a body.

use crate::auth::Principal;
use crate::metrics::ServiceMetrics;
use crate::store::Store;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

#[derive(Debug)]
pub struct AppState {
    pub store: Store,
    pub metrics: Arc<ServiceMetrics>,
    pub max_files: usize,
    /// Dashboard cookies carry `Secure` (browsers keep them over HTTPS and
    /// on loopback).
    pub session_ttl: std::time::Duration,
}

pub type Shared = Arc<AppState>;

#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        tracing::warn!(error = %e, "database error answering a request");
        ApiError(StatusCode::SERVICE_UNAVAILABLE, "the service's database is not answering; try again".into())
    }
}

fn err(code: StatusCode, msg: impl Into<String>) -> ApiError {
    ApiError(code, msg.into())
}

/// The bearer token's user.
async fn principal(state: &AppState, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let h = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| err(StatusCode::UNAUTHORIZED, "no token: send Authorization: Bearer TOKEN"))?;
    let token = h
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| err(StatusCode::UNAUTHORIZED, "the Authorization header is not Bearer TOKEN"))?;
    state.store.principal(token).await?.ok_or_else(|| err(StatusCode::UNAUTHORIZED, "unknown token"))
}

pub fn router(state: Shared) -> Router {
    // A 100,000-file job is about 20 MB of JSON; allow a little over 1 KiB
    // per file, and never less than 1 MiB.
    let body_limit = (state.max_files * 1200).max(1 << 20);
    Router::new()
        .route("/api/v1/jobs", post(submit).get(list))
        .route("/api/v1/jobs/{id}", get(show).delete(cancel))
        .route("/api/v1/jobs/{id}/retry", post(retry))
        .route("/api/v1/links", get(links))
        .route("/api/v1/whoami", get(whoami))
        .route("/metrics", get(metrics))
        .merge(crate::dashboard::router())
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

async fn submit(State(st): State<Shared>, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let p = principal(&st, &headers).await?;
    let job = crate::job::parse(&body, st.max_files)
        .map_err(|e| ApiError(StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST), e.to_string()))?;
    let id = st.store.insert_job(&p.user, &job).await?;
    tracing::info!(job = %id, user = %p.user, files = job.files.len(), "job submitted");
    Ok((StatusCode::CREATED, Json(json!({ "job_id": id, "files": job.files.len() }))).into_response())
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    limit: Option<i64>,
}

async fn list(State(st): State<Shared>, headers: HeaderMap, Query(q): Query<ListQuery>) -> Result<Response, ApiError> {
    let p = principal(&st, &headers).await?;
    let jobs = st.store.list_jobs(&p, q.limit.unwrap_or(100).clamp(1, 1000)).await?;
    Ok(Json(json!({ "jobs": jobs })).into_response())
}

#[derive(Debug, Deserialize)]
struct ShowQuery {
    files: Option<i64>,
    offset: Option<i64>,
}

fn not_found(id: &str, p: &Principal) -> ApiError {
    err(StatusCode::NOT_FOUND, format!("no job {id} that {} may see", p.user))
}

async fn show(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<ShowQuery>,
) -> Result<Response, ApiError> {
    let p = principal(&st, &headers).await?;
    let job = st.store.job(&p, &id).await?.ok_or_else(|| not_found(&id, &p))?;
    let files = st.store.files(&id, q.offset.unwrap_or(0).max(0), q.files.unwrap_or(1000).clamp(0, 10_000)).await?;
    let mut v = serde_json::to_value(&job).unwrap_or_default();
    v["files"] = serde_json::to_value(files).unwrap_or_default();
    Ok(Json(v).into_response())
}

async fn cancel(State(st): State<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Result<Response, ApiError> {
    let p = principal(&st, &headers).await?;
    let job = st.store.job(&p, &id).await?.ok_or_else(|| not_found(&id, &p))?;
    if !matches!(job.state.as_str(), "queued" | "active") {
        return Err(err(StatusCode::CONFLICT, format!("job {id} is already {}", job.state)));
    }
    let state = st.store.cancel_job(&id).await?;
    tracing::info!(job = %id, user = %p.user, "job canceled");
    Ok(Json(json!({ "job_id": id, "state": state })).into_response())
}

async fn retry(State(st): State<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Result<Response, ApiError> {
    let p = principal(&st, &headers).await?;
    let job = st.store.job(&p, &id).await?.ok_or_else(|| not_found(&id, &p))?;
    if matches!(job.state.as_str(), "queued" | "active") {
        return Err(err(StatusCode::CONFLICT, format!("job {id} is still {}", job.state)));
    }
    let n = st.store.retry_job(&id).await?;
    Ok(Json(json!({ "job_id": id, "requeued": n })).into_response())
}

async fn links(State(st): State<Shared>, headers: HeaderMap) -> Result<Response, ApiError> {
    principal(&st, &headers).await?;
    let links = st.store.links().await?;
    let decisions = st.store.decisions(None, 200).await?;
    Ok(Json(json!({ "links": links, "decisions": decisions })).into_response())
}

async fn whoami(State(st): State<Shared>, headers: HeaderMap) -> Result<Response, ApiError> {
    let p = principal(&st, &headers).await?;
    Ok(Json(json!({ "user": p.user, "admin": p.admin })).into_response())
}

async fn metrics(State(st): State<Shared>) -> Result<Response, ApiError> {
    let text = st.metrics.render(&st.store).await?;
    Ok(([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response())
}
