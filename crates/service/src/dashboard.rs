//! The web dashboard: jobs, files, per-link throughput over time and the
//! optimiser's decisions, with cancel and retry buttons.
//!
//! It signs in with the same bearer tokens as the API, through a form. The
//! session cookie is `Secure` (sent only over HTTPS — and, as browsers
//! treat it, to loopback), `HttpOnly` (no script reads it) and
//! `SameSite=Strict` (no other site's page sends it). Every action is a
//! POST carrying the session's CSRF token in a hidden field (the
//! synchronizer-token pattern), and the sign-in form carries one tied to a
//! short-lived cookie (double submit), so no other page can sign a browser
//! in or act for it. Pages send a strict Content-Security-Policy: no script
//! at all, styles only from this server. Everything shown is HTML-escaped.

use crate::api::Shared;
use crate::auth::{self, Principal};
use crate::store::{now_ms, DecisionRow};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde::Deserialize;
use std::fmt::Write;

const SESSION: &str = "ferry_session";
const LOGIN_CSRF: &str = "ferry_login_csrf";

pub fn router() -> Router<Shared> {
    Router::new()
        .route("/", get(home))
        .route("/login", post(login))
        .route("/logout", post(logout))
        .route("/jobs/{id}", get(job_page))
        .route("/jobs/{id}/cancel", post(cancel))
        .route("/jobs/{id}/retry", post(retry))
        .route("/style.css", get(style))
}

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

fn page(title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} — Ferry transfer service</title>\
         <link rel=\"stylesheet\" href=\"/style.css\"></head><body><header><h1>Ferry transfer service</h1></header>\
         <main>{body}</main></body></html>",
        esc(title)
    );
    let mut r = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    harden(r.headers_mut());
    r
}

fn harden(h: &mut HeaderMap) {
    let set = |h: &mut HeaderMap, k: &'static str, v: &'static str| {
        h.insert(k, HeaderValue::from_static(v));
    };
    set(
        h,
        "content-security-policy",
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(h, "x-frame-options", "DENY");
    set(h, "x-content-type-options", "nosniff");
    // Not `no-referrer`: with it Chromium sends `Origin: null` on our own
    // form posts, and the origin check below could not tell them apart.
    set(h, "referrer-policy", "same-origin");
    set(h, "cache-control", "no-store");
}

fn redirect(to: &str, cookies: &[String]) -> Response {
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, to.to_string())]).into_response();
    for c in cookies {
        if let Ok(v) = HeaderValue::from_str(c) {
            r.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    harden(r.headers_mut());
    r
}

fn forbidden(msg: &str) -> Response {
    let mut r = (StatusCode::FORBIDDEN, format!("{msg}\n")).into_response();
    harden(r.headers_mut());
    r
}

/// A request that changes something must come from our own pages: when the
/// browser says where it comes from (`Origin`), that must be this host.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return true };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    origin.split_once("://").is_some_and(|(_, rest)| rest == host)
}

async fn signed_in(st: &Shared, headers: &HeaderMap) -> Option<(Principal, String)> {
    let id = cookie(headers, SESSION)?;
    st.store.session(&id).await.ok().flatten()
}

async fn home(State(st): State<Shared>, headers: HeaderMap) -> Response {
    let Some((p, csrf)) = signed_in(&st, &headers).await else {
        return login_form(None);
    };
    match overview(&st, &p, &csrf).await {
        Ok(body) => page("Jobs", &body),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("database: {e}")).into_response(),
    }
}

fn login_form(error: Option<&str>) -> Response {
    let csrf = auth::new_secret("");
    let err = error.map(|e| format!("<p class=\"error\">{}</p>", esc(e))).unwrap_or_default();
    let body = format!(
        "<section class=\"login\"><h2>Sign in</h2>{err}<form method=\"post\" action=\"/login\">\
         <label for=\"token\">Token (from <code>ferry service token add</code>)</label>\
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required>\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><button type=\"submit\">Sign in</button></form></section>"
    );
    let mut r = page("Sign in", &body);
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{LOGIN_CSRF}={csrf}; Path=/login; Max-Age=600; Secure; HttpOnly; SameSite=Strict"
    )) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    r
}

#[derive(Debug, Deserialize)]
struct LoginForm {
    token: String,
    csrf: String,
}

async fn login(State(st): State<Shared>, headers: HeaderMap, Form(f): Form<LoginForm>) -> Response {
    let expected = cookie(&headers, LOGIN_CSRF).unwrap_or_default();
    if !same_origin(&headers) || expected.is_empty() || !auth::same(&expected, &f.csrf) {
        return forbidden("the sign-in form expired or came from another site; reload the page and sign in again");
    }
    let Ok(Some(p)) = st.store.principal(f.token.trim()).await else {
        let mut r = login_form(Some("unknown token"));
        *r.status_mut() = StatusCode::UNAUTHORIZED;
        return r;
    };
    let Ok((id, _)) = st.store.new_session(&p, st.session_ttl).await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "database").into_response();
    };
    tracing::info!(user = %p.user, "dashboard sign-in");
    redirect(
        "/",
        &[
            format!("{SESSION}={id}; Path=/; Max-Age={}; Secure; HttpOnly; SameSite=Strict", st.session_ttl.as_secs()),
            format!("{LOGIN_CSRF}=; Path=/login; Max-Age=0; Secure; HttpOnly; SameSite=Strict"),
        ],
    )
}

#[derive(Debug, Deserialize)]
struct ActionForm {
    csrf: String,
}

/// The session and a checked CSRF token, or the refusal to send.
async fn action(st: &Shared, headers: &HeaderMap, f: &ActionForm) -> Result<Principal, Response> {
    let Some((p, csrf)) = signed_in(st, headers).await else {
        return Err(forbidden("not signed in"));
    };
    if !same_origin(headers) || !auth::same(&csrf, &f.csrf) {
        return Err(forbidden("missing or wrong CSRF token; reload the page"));
    }
    Ok(p)
}

async fn logout(State(st): State<Shared>, headers: HeaderMap, Form(f): Form<ActionForm>) -> Response {
    if let Err(r) = action(&st, &headers, &f).await {
        return r;
    }
    if let Some(id) = cookie(&headers, SESSION) {
        let _ = st.store.end_session(&id).await;
    }
    redirect("/", &[format!("{SESSION}=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Strict")])
}

async fn cancel(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(f): Form<ActionForm>,
) -> Response {
    let p = match action(&st, &headers, &f).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    match st.store.job(&p, &id).await {
        Ok(Some(j)) if matches!(j.state.as_str(), "queued" | "active") => {
            let _ = st.store.cancel_job(&id).await;
            redirect(&format!("/jobs/{id}"), &[])
        }
        Ok(Some(_)) => redirect(&format!("/jobs/{id}"), &[]),
        _ => (StatusCode::NOT_FOUND, "no such job").into_response(),
    }
}

async fn retry(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(f): Form<ActionForm>,
) -> Response {
    let p = match action(&st, &headers, &f).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    match st.store.job(&p, &id).await {
        Ok(Some(j)) if !matches!(j.state.as_str(), "queued" | "active") => {
            let _ = st.store.retry_job(&id).await;
            redirect(&format!("/jobs/{id}"), &[])
        }
        Ok(Some(_)) => redirect(&format!("/jobs/{id}"), &[]),
        _ => (StatusCode::NOT_FOUND, "no such job").into_response(),
    }
}

fn mb(b: f64) -> String {
    format!("{:.1}", b / 1e6)
}

fn ago(ms: i64) -> String {
    let s = (now_ms() - ms).max(0) / 1000;
    if s < 120 {
        format!("{s} s ago")
    } else if s < 7200 {
        format!("{} min ago", s / 60)
    } else {
        format!("{} h ago", s / 3600)
    }
}

fn button(action: &str, label: &str, csrf: &str) -> String {
    format!(
        "<form method=\"post\" action=\"{}\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <button type=\"submit\">{}</button></form>",
        esc(action),
        esc(csrf),
        esc(label)
    )
}

async fn overview(st: &Shared, p: &Principal, csrf: &str) -> Result<String, crate::store::StoreError> {
    let mut b = String::new();
    let _ = write!(
        b,
        "<p class=\"who\">Signed in as <b>{}</b>{} {}</p>",
        esc(&p.user),
        if p.admin { " (admin: all users' jobs)" } else { "" },
        button("/logout", "Sign out", csrf)
    );
    let jobs = st.store.list_jobs(p, 50).await?;
    b.push_str("<h2>Jobs</h2><table><thead><tr><th>job</th><th>user</th><th>state</th><th>files</th><th>done</th>\
                <th>active</th><th>queued</th><th>failed</th><th>MB done</th><th>submitted</th><th></th></tr></thead><tbody>");
    for j in &jobs {
        let act = if matches!(j.state.as_str(), "queued" | "active") {
            button(&format!("/jobs/{}/cancel", j.job_id), "Cancel", csrf)
        } else if j.counts.failed + j.counts.canceled > 0 {
            button(&format!("/jobs/{}/retry", j.job_id), "Retry", csrf)
        } else {
            String::new()
        };
        let _ = write!(
            b,
            "<tr><td><a href=\"/jobs/{id}\">{short}</a></td><td>{user}</td><td class=\"state {state}\">{state}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{act}</td></tr>",
            j.files_total,
            j.counts.done,
            j.counts.active,
            j.counts.queued,
            j.counts.failed,
            mb(j.bytes_done as f64),
            ago(j.created_ms),
            id = esc(&j.job_id),
            short = esc(&j.job_id[..8.min(j.job_id.len())]),
            user = esc(&j.owner),
            state = esc(&j.state),
        );
    }
    if jobs.is_empty() {
        b.push_str("<tr><td colspan=\"11\">No jobs yet: <code>ferry submit</code> one.</td></tr>");
    }
    b.push_str("</tbody></table>");
    let links = st.store.links().await?;
    b.push_str(
        "<h2>Links</h2><table><thead><tr><th>link</th><th>active allowed</th><th>streams</th>\
                <th>throughput (EMA, MB/s)</th><th>last decision</th></tr></thead><tbody>",
    );
    for l in &links {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&l.link),
            l.active_target,
            l.streams,
            mb(l.ema),
            if l.decided_ms > 0 { ago(l.decided_ms) } else { "none yet".into() }
        );
    }
    b.push_str("</tbody></table>");
    let decisions = st.store.decisions(None, 400).await?;
    for l in &links {
        let mine: Vec<&DecisionRow> = decisions.iter().filter(|d| d.link == l.link).collect();
        if mine.len() >= 2 {
            let _ =
                write!(b, "<h3>Throughput over time: {}</h3><div class=\"plot\">{}</div>", esc(&l.link), plot(&mine));
        }
    }
    b.push_str("<h2>Optimiser decisions</h2><table><thead><tr><th>when</th><th>link</th><th>node</th><th>active</th>\
                <th>streams</th><th>MB/s</th><th>EMA</th><th>success</th><th>queued</th><th>reason</th></tr></thead><tbody>");
    for d in decisions.iter().take(20) {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"reason\">{}</td></tr>",
            ago(d.at_ms),
            esc(&d.link),
            esc(&d.node),
            d.active,
            d.streams,
            mb(d.throughput),
            mb(d.ema),
            d.success_rate.map_or("–".into(), |r| format!("{:.0}%", r * 100.0)),
            d.queued,
            esc(&d.reason)
        );
    }
    b.push_str("</tbody></table>");
    let nodes = st.store.nodes().await?;
    b.push_str("<h2>Nodes</h2><table><thead><tr><th>node</th><th>host</th><th>heartbeat</th></tr></thead><tbody>");
    for (id, host, hb) in nodes.iter().take(10) {
        let _ = write!(b, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(id), esc(host), ago(*hb));
    }
    b.push_str("</tbody></table>");
    Ok(b)
}

/// Throughput (per interval and its moving average) and the allowed
/// transfers, over time, as an inline SVG.
fn plot(rows: &[&DecisionRow]) -> String {
    use plotters::prelude::*;
    let mut svg = String::new();
    let t0 = rows.iter().map(|d| d.at_ms).min().unwrap_or(0);
    let pts: Vec<(f64, f64, f64, f64)> = rows
        .iter()
        .rev()
        .map(|d| ((d.at_ms - t0) as f64 / 1e3, d.throughput / 1e6, d.ema / 1e6, d.active as f64))
        .collect();
    let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max);
    let ymax = pts.iter().map(|p| p.1.max(p.2)).fold(1.0, f64::max) * 1.1;
    {
        let root = SVGBackend::with_string(&mut svg, (720, 240)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let Ok(mut chart) = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        else {
            return String::new();
        };
        let _ = chart.configure_mesh().x_desc("seconds").y_desc("MB/s").draw();
        let _ = chart.draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.1)), &RGBColor(150, 150, 150))).map(|s| {
            s.label("per interval").legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], RGBColor(150, 150, 150)))
        });
        let _ = chart
            .draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.2)), BLUE.stroke_width(2)))
            .map(|s| s.label("EMA").legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], BLUE.stroke_width(2))));
        let scale = ymax / pts.iter().map(|p| p.3).fold(1.0, f64::max) / 1.2;
        let _ = chart
            .draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.3 * scale)), RED.stroke_width(1)))
            .map(|s| s.label("active allowed (scaled)").legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], RED)));
        let _ = chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw();
        let _ = root.present();
    }
    svg
}

async fn job_page(State(st): State<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let Some((p, csrf)) = signed_in(&st, &headers).await else {
        return redirect("/", &[]);
    };
    let Ok(Some(j)) = st.store.job(&p, &id).await else {
        return (StatusCode::NOT_FOUND, "no such job").into_response();
    };
    let Ok(files) = st.store.files(&id, 0, 500).await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "database").into_response();
    };
    let mut b = String::new();
    let _ = write!(
        b,
        "<p><a href=\"/\">All jobs</a></p><h2>Job {}</h2><p>Owner <b>{}</b>, state <b class=\"state {s}\">{s}</b>, \
         {} files: {} done, {} active, {} queued, {} failed, {} canceled. {}</p>",
        esc(&j.job_id),
        esc(&j.owner),
        j.files_total,
        j.counts.done,
        j.counts.active,
        j.counts.queued,
        j.counts.failed,
        j.counts.canceled,
        j.reason.as_deref().map(esc).unwrap_or_default(),
        s = esc(&j.state),
    );
    if matches!(j.state.as_str(), "queued" | "active") {
        b.push_str(&button(&format!("/jobs/{}/cancel", j.job_id), "Cancel job", &csrf));
    } else if j.counts.failed + j.counts.canceled > 0 {
        b.push_str(&button(&format!("/jobs/{}/retry", j.job_id), "Retry failed files", &csrf));
    }
    b.push_str(
        "<table><thead><tr><th>#</th><th>source</th><th>destination</th><th>state</th><th>attempts</th>\
                <th>MB</th><th>s</th><th>checksum</th><th>reason</th></tr></thead><tbody>",
    );
    for f in &files {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"state {s}\">{s}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"reason\">{}</td></tr>",
            f.index,
            esc(&f.source),
            esc(&f.destination),
            f.attempts,
            f.bytes.map_or("–".into(), |x| mb(x as f64)),
            f.seconds.map_or("–".into(), |x| format!("{x:.1}")),
            esc(f.verified.as_deref().unwrap_or("")),
            esc(f.reason.as_deref().unwrap_or("")),
            s = esc(&f.state),
        );
    }
    b.push_str("</tbody></table>");
    page(&format!("Job {}", j.job_id), &b)
}

async fn style() -> Response {
    let mut r = ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response();
    harden(r.headers_mut());
    r
}

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}\
header{background:#1d3557;color:#fff;padding:.6em 1.2em}header h1{margin:0;font-size:1.3em}\
main{padding:1em 1.2em}table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em;background:#fff}\
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:left}th{background:#eef}\
td.reason{max-width:40em}.state.done{color:#2a7}.state.failed,.state.partial{color:#c33}\
.state.active{color:#36c}.state.canceled{color:#888}form.inline{display:inline}\
.login{max-width:26em;margin:3em auto;background:#fff;padding:1em 2em;border:1px solid #ddd}\
.login input[type=password]{width:100%;margin:.5em 0 1em;padding:.4em}.error{color:#c33}\
.plot svg{background:#fff;border:1px solid #ddd}h2{font-size:1.1em}h3{font-size:1em}";
