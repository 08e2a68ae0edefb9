//! Job submissions in the shape sites know from FTS3: a list of files, each
//! with sources, destinations, an optional checksum (`ALGO:value`) and size,
//! plus job parameters.
//!
//! Parsing is strict: unknown fields are refused (`deny_unknown_fields`), so
//! a misspelt `verify_chcksum` is an error rather than a silently ignored
//! wish. Every limit is checked before anything is stored, and a job is
//! stored whole or not at all (see `store.rs`).

use ferry_client::location::{Location, Scheme};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Most files one job may hold unless the node is configured otherwise.
pub const DEFAULT_MAX_FILES: usize = 100_000;
/// Longest URL accepted (bytes).
pub const MAX_URL: usize = 4096;
/// Longest metadata (serialised JSON, bytes) per file or job.
pub const MAX_METADATA: usize = 4096;
/// The transports a node can drive today.
pub const TRANSPORTS: [&str; 1] = ["tcp"];
/// Checksum algorithms the servers compute (`CKSM`).
pub const CHECKSUMS: [&str; 7] = ["ADLER32", "CRC32C", "MD5", "SHA1", "SHA256", "SHA512", "XXH128"];

#[derive(Debug, Error, PartialEq, Eq)]
pub enum JobError {
    #[error("the job is not valid JSON for a transfer job: {0}")]
    Json(String),
    #[error("the job has no files")]
    Empty,
    #[error("the job has {got} files; this service accepts at most {max} per job (split it)")]
    TooManyFiles { got: usize, max: usize },
    #[error("file {index}: {message}")]
    File { index: usize, message: String },
    #[error("params: {0}")]
    Params(String),
}

impl JobError {
    /// The HTTP status that says what went wrong.
    pub fn status(&self) -> u16 {
        match self {
            JobError::TooManyFiles { .. } => 413,
            _ => 400,
        }
    }
}

/// One entry of `files`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    pub sources: Vec<String>,
    pub destinations: Vec<String>,
    /// `ALGO:value`, e.g. `ADLER32:0a1b2c3d`.
    #[serde(default)]
    pub checksum: Option<String>,
    #[serde(default)]
    pub filesize: Option<u64>,
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
    #[serde(default)]
    pub activity: Option<String>,
}

/// `verify_checksum`: FTS3 takes a boolean or a mode name.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum VerifySetting {
    Flag(bool),
    Mode(String),
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(default)]
    pub verify_checksum: Option<VerifySetting>,
    #[serde(default)]
    pub overwrite: Option<bool>,
    /// Retries after a failed attempt (FTS3 `retry`).
    #[serde(default)]
    pub retry: Option<u32>,
    /// Seconds before the first retry; doubled for each further one.
    #[serde(default)]
    pub retry_delay: Option<u32>,
    /// Parallel streams per transfer (FTS3 `nostreams`); the optimiser
    /// chooses when absent.
    #[serde(default)]
    pub nostreams: Option<u32>,
    #[serde(default)]
    pub streams: Option<u32>,
    #[serde(default)]
    pub transport: Option<String>,
    /// 1 (lowest) to 5 (highest); FTS3's default is 3.
    #[serde(default)]
    pub priority: Option<u8>,
    /// Seconds one attempt may take before it is abandoned.
    #[serde(default)]
    pub timeout: Option<u32>,
    #[serde(default)]
    pub job_metadata: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JobSubmission {
    pub files: Vec<FileSpec>,
    #[serde(default)]
    pub params: Params,
}

/// How checksums are compared after a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verify {
    /// Not at all.
    None,
    /// Source against destination (and against the given value, if any).
    Both,
    /// The destination against the value given in the job.
    Target,
}

impl Verify {
    pub fn as_str(self) -> &'static str {
        match self {
            Verify::None => "none",
            Verify::Both => "both",
            Verify::Target => "target",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Verify::None),
            "both" => Some(Verify::Both),
            "target" => Some(Verify::Target),
            _ => None,
        }
    }
}

/// A job's parameters after defaults and checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobParams {
    pub verify: Verify,
    pub overwrite: bool,
    pub retry: u32,
    pub retry_delay_s: u32,
    pub streams: Option<u32>,
    pub transport: String,
    pub priority: u8,
    pub timeout_s: u32,
}

/// One file of a checked job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFile {
    pub source: String,
    pub destination: String,
    /// `source host:port -> destination host:port`.
    pub link: String,
    pub src_se: String,
    pub dst_se: String,
    /// Upper-case algorithm and lower-case value.
    pub checksum: Option<(String, String)>,
    pub filesize: Option<u64>,
    pub metadata: Option<String>,
    pub activity: String,
}

/// A submission that passed every check, ready to store.
#[derive(Debug, Clone)]
pub struct CheckedJob {
    pub params: JobParams,
    pub metadata: Option<String>,
    pub files: Vec<JobFile>,
}

/// Parses and checks a submission's JSON.
pub fn parse(body: &[u8], max_files: usize) -> Result<CheckedJob, JobError> {
    let sub: JobSubmission = serde_json::from_slice(body).map_err(|e| JobError::Json(e.to_string()))?;
    check(sub, max_files)
}

/// The storage endpoint of a URL: `scheme://host:port`.
fn endpoint(u: &ferry_client::RemoteUrl) -> String {
    let scheme = match u.scheme {
        Scheme::Ftp => "ftp",
        Scheme::Ftps => "ftps",
    };
    let host = if u.host.contains(':') { format!("[{}]", u.host) } else { u.host.clone() };
    format!("{scheme}://{host}:{}", u.port)
}

/// Checks one URL: a server URL Ferry can drive, naming a file, with no
/// password in it (nodes bring their own credentials).
pub fn check_url(s: &str) -> Result<ferry_client::RemoteUrl, String> {
    if s.len() > MAX_URL {
        return Err(format!("URL longer than {MAX_URL} bytes"));
    }
    if s.chars().any(|c| c.is_control()) {
        return Err("URL contains control characters".into());
    }
    if !s.contains("://") {
        return Err(format!("{s:?} is not a URL (use ftp:// or ftps://)"));
    }
    let scheme = s.split("://").next().unwrap_or("").to_ascii_lowercase();
    if scheme == "file" {
        return Err("file:// URLs are not accepted: a node's own files are not for users to read or write".into());
    }
    match Location::parse(s) {
        Ok(Location::Remote(u)) => {
            if url::Url::parse(s).ok().and_then(|u| u.password().map(str::to_string)).is_some() {
                return Err(format!(
                    "{u}: URLs must not carry passwords (they would be stored); the service's nodes bring their own \
                     credentials"
                ));
            }
            if u.is_dir_url() || u.file_name().is_none() {
                return Err(format!("{u}: names a directory; a job lists files (ferry submit -r expands trees)"));
            }
            Ok(u)
        }
        Ok(Location::Local(_)) => Err(format!("{s:?} is not a URL (use ftp:// or ftps://)")),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_checksum(s: &str) -> Result<(String, String), String> {
    let (alg, value) = s.split_once(':').ok_or_else(|| format!("checksum {s:?} is not ALGO:value"))?;
    let alg = alg.to_ascii_uppercase();
    if !CHECKSUMS.contains(&alg.as_str()) {
        return Err(format!("checksum algorithm {alg:?} is not one of {}", CHECKSUMS.join(", ")));
    }
    if value.is_empty() || value.len() > 128 || !value.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("checksum value {value:?} is not hexadecimal"));
    }
    Ok((alg, value.to_ascii_lowercase()))
}

fn metadata(v: &Option<serde_json::Value>) -> Result<Option<String>, String> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => {
            let s = v.to_string();
            if s.len() > MAX_METADATA {
                return Err(format!("metadata longer than {MAX_METADATA} bytes"));
            }
            Ok(Some(s))
        }
    }
}

fn check_params(p: &Params) -> Result<JobParams, JobError> {
    let err = |m: String| JobError::Params(m);
    let verify = match &p.verify_checksum {
        None | Some(VerifySetting::Flag(true)) => Verify::Both,
        Some(VerifySetting::Flag(false)) => Verify::None,
        Some(VerifySetting::Mode(m)) => match m.to_ascii_lowercase().as_str() {
            "both" | "source" | "s" | "b" => Verify::Both,
            "target" | "destination" | "t" => Verify::Target,
            "none" | "n" => Verify::None,
            other => return Err(err(format!("verify_checksum {other:?} is not true, false, both, target or none"))),
        },
    };
    let retry = p.retry.unwrap_or(3);
    if retry > 20 {
        return Err(err(format!("retry {retry} is more than 20")));
    }
    let retry_delay_s = p.retry_delay.unwrap_or(2);
    if retry_delay_s > 3600 {
        return Err(err("retry_delay is more than an hour".into()));
    }
    if p.nostreams.is_some() && p.streams.is_some() && p.nostreams != p.streams {
        return Err(err("nostreams and streams disagree".into()));
    }
    let streams = p.nostreams.or(p.streams);
    if let Some(n) = streams {
        if !(1..=64).contains(&n) {
            return Err(err(format!("nostreams {n} is not between 1 and 64")));
        }
    }
    let transport = p.transport.clone().unwrap_or_else(|| "tcp".into()).to_ascii_lowercase();
    if !TRANSPORTS.contains(&transport.as_str()) {
        return Err(err(format!(
            "transport {transport:?} is not supported here (supported: {})",
            TRANSPORTS.join(", ")
        )));
    }
    let priority = p.priority.unwrap_or(3);
    if !(1..=5).contains(&priority) {
        return Err(err(format!("priority {priority} is not between 1 and 5")));
    }
    let timeout_s = p.timeout.unwrap_or(3600);
    if !(1..=7 * 86400).contains(&timeout_s) {
        return Err(err("timeout must be between 1 s and 7 days".into()));
    }
    Ok(JobParams {
        verify,
        overwrite: p.overwrite.unwrap_or(false),
        retry,
        retry_delay_s,
        streams,
        transport,
        priority,
        timeout_s,
    })
}

/// Applies defaults and checks every field.
pub fn check(sub: JobSubmission, max_files: usize) -> Result<CheckedJob, JobError> {
    if sub.files.is_empty() {
        return Err(JobError::Empty);
    }
    if sub.files.len() > max_files {
        return Err(JobError::TooManyFiles { got: sub.files.len(), max: max_files });
    }
    let params = check_params(&sub.params)?;
    let job_metadata = metadata(&sub.params.job_metadata).map_err(JobError::Params)?;
    let mut files = Vec::with_capacity(sub.files.len());
    for (index, f) in sub.files.into_iter().enumerate() {
        let fail = |message: String| JobError::File { index, message };
        if f.sources.len() != 1 || f.destinations.len() != 1 {
            return Err(fail(format!(
                "has {} sources and {} destinations; exactly one of each is supported",
                f.sources.len(),
                f.destinations.len()
            )));
        }
        let src = check_url(&f.sources[0]).map_err(|m| fail(format!("source: {m}")))?;
        let dst = check_url(&f.destinations[0]).map_err(|m| fail(format!("destination: {m}")))?;
        if src.to_string() == dst.to_string() {
            return Err(fail("source and destination are the same file".into()));
        }
        let checksum = f.checksum.as_deref().map(parse_checksum).transpose().map_err(fail)?;
        if params.verify == Verify::Target && checksum.is_none() {
            return Err(fail("verify_checksum is target but the file has no checksum".into()));
        }
        let activity = f.activity.clone().unwrap_or_else(|| "default".into());
        if activity.len() > 64 || activity.chars().any(|c| c.is_control()) {
            return Err(fail("activity must be at most 64 printable characters".into()));
        }
        let (src_se, dst_se) = (endpoint(&src), endpoint(&dst));
        files.push(JobFile {
            // Stored as given (they were checked to carry no password).
            source: f.sources[0].clone(),
            destination: f.destinations[0].clone(),
            link: format!("{src_se} -> {dst_se}"),
            src_se,
            dst_se,
            checksum,
            filesize: f.filesize,
            metadata: metadata(&f.metadata).map_err(fail)?,
            activity,
        });
    }
    Ok(CheckedJob { params, metadata: job_metadata, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(files: &str, params: &str) -> Vec<u8> {
        format!(r#"{{"files": [{files}], "params": {{{params}}}}}"#).into_bytes()
    }
    const F: &str = r#"{"sources": ["ftp://h:2811/a"], "destinations": ["ftp://u@d:2812/b"]}"#;

    #[test]
    fn accepts_the_fts3_shape_with_defaults() {
        let j = parse(&job(F, ""), 10).unwrap();
        assert_eq!(j.params.verify, Verify::Both);
        assert_eq!((j.params.retry, j.params.priority, j.params.streams), (3, 3, None));
        assert_eq!(j.files[0].link, "ftp://h:2811 -> ftp://d:2812");
        let j = parse(
            &job(
                r#"{"sources": ["ftps://h/a"], "destinations": ["ftp://d/b"], "checksum": "adler32:0A1B", "filesize": 5}"#,
                r#""verify_checksum": "target", "nostreams": 4, "overwrite": true, "priority": 5"#,
            ),
            10,
        )
        .unwrap();
        assert_eq!(j.files[0].checksum, Some(("ADLER32".into(), "0a1b".into())));
        assert_eq!((j.params.verify, j.params.streams, j.params.overwrite), (Verify::Target, Some(4), true));
    }

    #[test]
    fn refuses_what_it_cannot_do_with_clear_reasons() {
        let e = |b: Vec<u8>| parse(&b, 3).unwrap_err().to_string();
        assert!(e(b"{".to_vec()).contains("not valid JSON"));
        assert!(e(job(F, r#""verify_chcksum": true"#)).contains("unknown field `verify_chcksum`"));
        assert!(e(format!(r#"{{"files": [{F}], "extra": 1}}"#).into_bytes()).contains("unknown field `extra`"));
        assert!(e(job(&F.replace("ftp://h", "gsiftp://h"), "")).contains("unsupported URL scheme"));
        assert!(e(job(&F.replace("ftp://h:2811/a", "file:///etc/passwd"), "")).contains("file://"));
        assert!(e(job(&F.replace("u@d", "u:secret@d"), "")).contains("must not carry passwords"));
        assert!(e(job(&F.replace("/a\"", "/dir/\""), "")).contains("directory"));
        assert!(e(job(F, r#""transport": "carrier-pigeon""#)).contains("not supported"));
        assert!(e(job(F, r#""priority": 9"#)).contains("priority"));
        assert!(e(job(&[F, F, F, F].join(","), "")).contains("at most 3"));
        assert_eq!(parse(&job(&[F, F, F, F].join(","), ""), 3).unwrap_err().status(), 413);
        assert!(e(job(&F.replace("}", r#", "checksum": "ROT13:zz"}"#), "")).contains("ROT13"));
        assert!(e(br#"{"files": []}"#.to_vec()).contains("no files"));
    }

    #[test]
    fn sql_significant_characters_are_just_characters() {
        let f = r#"{"sources": ["ftp://h/a'; DROP TABLE jobs;--"], "destinations": ["ftp://d/b\" OR 1=1"],
                    "activity": "x'); --"}"#;
        let j = parse(&job(f, ""), 3).unwrap();
        assert_eq!(j.files[0].source, "ftp://h/a'; DROP TABLE jobs;--");
        assert_eq!(j.files[0].activity, "x'); --");
    }
}
