//! The client's configuration file: defaults and per-server settings for
//! the data-channel knobs (parallel streams, TCP buffer, MODE E block
//! size, staging), so that what `ferry tune` found for a server is used by
//! every later `ferry cp` to it.
//!
//! ```toml
//! # $XDG_CONFIG_HOME/ferry/client.toml (or ~/.config/ferry/client.toml)
//! [defaults]
//! parallel = 4            # streams, or "auto" (chosen from the measured RTT)
//! tcp_buffer = "auto"     # bytes ("16M"), or "auto": kernel autotuning
//! block_size = "1M"
//! staging = "off"         # bytes ("8M"), or "off": synchronous
//!
//! [hosts."data.example.org:2811"]   # or [hosts."data.example.org"]: any port
//! parallel = 8
//! tcp_buffer = "16M"
//! ```
//!
//! Where a setting comes from, most important first: a command-line flag;
//! the section of the server (`"host:port"`, then `"host"`); `[defaults]`;
//! Ferry's built-in behaviour (streams chosen from the RTT, autotuned
//! buffers, 1 MiB blocks, synchronous mode). A copy between two servers
//! uses the source's section, then the destination's. The file is found
//! at `--config PATH`, else `$FERRY_CONFIG`, else
//! `$XDG_CONFIG_HOME/ferry/client.toml`, else `~/.config/ferry/client.toml`;
//! a missing file at the implicit places is no error, a missing file that
//! was named explicitly is.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The most streams a setting may ask for (as `ferry cp -p`).
pub const MAX_PARALLEL: u32 = 64;
/// The largest staging ring (as `ferry cp --staging`).
pub const MAX_STAGING: u64 = 64 << 20;
/// The largest MODE E block (as `ferry cp --block-size`).
pub const MAX_BLOCK: u64 = 64 << 20;

/// Why the file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
}

/// A knob's value: Ferry's built-in behaviour ("auto" or "off"), or a
/// number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice<T> {
    /// `"auto"` for streams and TCP buffer, `"off"` for staging.
    Builtin,
    Value(T),
}

impl<T: Copy> Choice<T> {
    pub fn value(self) -> Option<T> {
        match self {
            Choice::Builtin => None,
            Choice::Value(v) => Some(v),
        }
    }
}

/// The knobs one section (or the command line) sets; `None` = not set here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Knobs {
    pub parallel: Option<Choice<u32>>,
    pub tcp_buffer: Option<Choice<u64>>,
    pub block_size: Option<u64>,
    pub staging: Option<Choice<u64>>,
}

impl Knobs {
    pub fn is_empty(&self) -> bool {
        *self == Knobs::default()
    }
}

/// The TOML form of a section: numbers or strings, checked by [`Knobs::from_raw`].
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKnobs {
    parallel: Option<toml::Value>,
    tcp_buffer: Option<toml::Value>,
    block_size: Option<toml::Value>,
    staging: Option<toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    defaults: RawKnobs,
    #[serde(default)]
    hosts: BTreeMap<String, RawKnobs>,
}

/// Parses `1048576`, `1M`, `512k`, `4G`, `1.5M` (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M') => (&s[..s.len() - 1], 1 << 20),
        Some('G') => (&s[..s.len() - 1], 1 << 30),
        Some('T') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let v: f64 = num.parse().map_err(|_| format!("{s:?} is not a size (e.g. 4096, 512K, 8M, 1G)"))?;
    if v.is_nan() || v < 0.0 || v * mult as f64 > u64::MAX as f64 {
        return Err(format!("{s:?} is out of range"));
    }
    Ok((v * mult as f64) as u64)
}

/// Formats a size the way [`parse_size`] reads it back exactly: `16M`,
/// `1536K`, or plain bytes.
pub fn format_size(n: u64) -> String {
    for (unit, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

fn size_value(key: &str, v: &toml::Value, word: &str) -> Result<Choice<u64>, String> {
    match v {
        toml::Value::Integer(n) if *n > 0 => Ok(Choice::Value(*n as u64)),
        toml::Value::String(s) if s.eq_ignore_ascii_case(word) => Ok(Choice::Builtin),
        toml::Value::String(s) => match parse_size(s) {
            Ok(0) => Err(format!("{key} must be positive (or \"{word}\")")),
            Ok(n) => Ok(Choice::Value(n)),
            Err(e) => Err(format!("{key}: {e}, or \"{word}\"")),
        },
        _ => Err(format!("{key} must be a size such as 16777216 or \"16M\", or \"{word}\"")),
    }
}

impl Knobs {
    fn from_raw(raw: &RawKnobs) -> Result<Knobs, String> {
        let parallel = match &raw.parallel {
            None => None,
            Some(toml::Value::Integer(n)) if (1..=MAX_PARALLEL as i64).contains(n) => Some(Choice::Value(*n as u32)),
            Some(toml::Value::String(s)) if s.eq_ignore_ascii_case("auto") => Some(Choice::Builtin),
            Some(_) => return Err(format!("parallel must be 1 to {MAX_PARALLEL}, or \"auto\"")),
        };
        let tcp_buffer = match &raw.tcp_buffer {
            None => None,
            Some(v) => match size_value("tcp_buffer", v, "auto")? {
                Choice::Value(n) if n > u32::MAX as u64 => return Err("tcp_buffer must be below 4G".into()),
                c => Some(c),
            },
        };
        let block_size = match &raw.block_size {
            None => None,
            Some(v) => match size_value("block_size", v, "-") {
                Ok(Choice::Value(n)) if n <= MAX_BLOCK => Some(n),
                _ => return Err("block_size must be a size of at most 64M, such as \"1M\"".into()),
            },
        };
        let staging = match &raw.staging {
            None => None,
            Some(v) => match size_value("staging", v, "off")? {
                Choice::Value(n) if n > MAX_STAGING => return Err("staging must be at most 64M (or \"off\")".into()),
                c => Some(c),
            },
        };
        Ok(Knobs { parallel, tcp_buffer, block_size, staging })
    }
}

/// Where a setting in effect came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The command line.
    Flag,
    /// A `[hosts."..."]` section (its name).
    Host(String),
    /// `[defaults]`.
    Defaults,
    /// Nothing set it: Ferry's built-in behaviour.
    Builtin,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag => write!(f, "command line"),
            Source::Host(h) => write!(f, "config [hosts.\"{h}\"]"),
            Source::Defaults => write!(f, "config [defaults]"),
            Source::Builtin => write!(f, "built-in"),
        }
    }
}

/// A setting in effect and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

/// The knobs in effect for one copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// `None`: chosen from the measured path.
    pub parallel: Sourced<Option<u32>>,
    /// `None`: kernel autotuning.
    pub tcp_buffer: Sourced<Option<u64>>,
    pub block_size: Sourced<u64>,
    /// `None`: synchronous mode.
    pub staging: Sourced<Option<u64>>,
}

impl Resolved {
    /// One phrase per setting and where it came from, e.g.
    /// (`-p 8`, `config [hosts."h:2811"]`).
    pub fn describe(&self) -> Vec<(String, &Source)> {
        let p = match self.parallel.value {
            Some(n) => format!("-p {n}"),
            None => "-p auto".into(),
        };
        let b = match self.tcp_buffer.value {
            Some(n) => format!("--tcp-bs {}", format_size(n)),
            None => "--tcp-bs auto".into(),
        };
        let s = match self.staging.value {
            Some(n) => format!("--staging {}", format_size(n)),
            None => "--staging off".into(),
        };
        vec![
            (p, &self.parallel.source),
            (b, &self.tcp_buffer.source),
            (format!("--block-size {}", format_size(self.block_size.value)), &self.block_size.source),
            (s, &self.staging.source),
        ]
    }

    /// Whether the configuration file set anything in effect.
    pub fn uses_config(&self) -> bool {
        [&self.parallel.source, &self.tcp_buffer.source, &self.block_size.source, &self.staging.source]
            .iter()
            .any(|s| matches!(s, Source::Host(_) | Source::Defaults))
    }

    pub fn to_json(&self) -> serde_json::Value {
        fn one<T: serde::Serialize>(s: &Sourced<T>) -> serde_json::Value {
            serde_json::json!({ "value": s.value, "from": s.source.to_string() })
        }
        serde_json::json!({
            "parallel": one(&self.parallel),
            "tcp_buffer": one(&self.tcp_buffer),
            "block_size": one(&self.block_size),
            "staging": one(&self.staging),
        })
    }
}

/// The parsed file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientConfig {
    /// Where it was read from; `None` when there was no file.
    pub path: Option<PathBuf>,
    pub defaults: Knobs,
    /// Section name (`"host:port"` or `"host"`) → knobs.
    pub hosts: BTreeMap<String, Knobs>,
}

impl ClientConfig {
    /// The file's location: `explicit`, else `$FERRY_CONFIG`, else the
    /// XDG place. The flag says whether it was named explicitly.
    pub fn locate(explicit: Option<&Path>) -> Option<(PathBuf, bool)> {
        if let Some(p) = explicit {
            return Some((p.to_path_buf(), true));
        }
        if let Some(p) = std::env::var_os("FERRY_CONFIG").filter(|p| !p.is_empty()) {
            return Some((PathBuf::from(p), true));
        }
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|p| !p.is_empty() && Path::new(p).is_absolute())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".config")))?;
        Some((base.join("ferry").join("client.toml"), false))
    }

    /// Loads the file [`locate`](Self::locate) finds; an implicit file
    /// that does not exist gives an empty configuration.
    pub fn load(explicit: Option<&Path>) -> Result<ClientConfig, ConfigError> {
        let Some((path, named)) = Self::locate(explicit) else { return Ok(ClientConfig::default()) };
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => Ok(ClientConfig::default()),
            Err(error) => Err(ConfigError::Read { path: path.display().to_string(), error }),
        }
    }

    /// Parses the text of a file read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<ClientConfig, ConfigError> {
        let err = |message: String| ConfigError::Parse { path: path.display().to_string(), message };
        let raw: RawConfig = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        let defaults = Knobs::from_raw(&raw.defaults).map_err(|m| err(format!("[defaults]: {m}")))?;
        let mut hosts = BTreeMap::new();
        for (name, k) in &raw.hosts {
            let knobs = Knobs::from_raw(k).map_err(|m| err(format!("[hosts.\"{name}\"]: {m}")))?;
            hosts.insert(name.to_ascii_lowercase(), knobs);
        }
        Ok(ClientConfig { path: Some(path.to_path_buf()), defaults, hosts })
    }

    /// The section name for a server: `host:port` (IPv6 in brackets).
    pub fn host_key(host: &str, port: u16) -> String {
        if host.contains(':') {
            format!("[{}]:{port}", host.to_ascii_lowercase())
        } else {
            format!("{}:{port}", host.to_ascii_lowercase())
        }
    }

    /// The sections that apply to these servers, most specific first.
    fn sections(&self, servers: &[(&str, u16)]) -> Vec<(String, &Knobs)> {
        let mut out = Vec::new();
        for &(host, port) in servers {
            for name in [Self::host_key(host, port), host.to_ascii_lowercase()] {
                if let Some(k) = self.hosts.get(&name) {
                    if !out.iter().any(|(n, _)| *n == name) {
                        out.push((name, k));
                    }
                }
            }
        }
        out
    }

    /// The knobs in effect for a copy involving `servers` (source first),
    /// given what the command line set.
    pub fn resolve(&self, servers: &[(&str, u16)], flags: &Knobs) -> Resolved {
        let sections = self.sections(servers);
        fn pick<T: Copy>(
            flags: &Knobs,
            sections: &[(String, &Knobs)],
            defaults: &Knobs,
            get: impl Fn(&Knobs) -> Option<T>,
            builtin: T,
        ) -> Sourced<T> {
            if let Some(v) = get(flags) {
                return Sourced { value: v, source: Source::Flag };
            }
            for (name, k) in sections {
                if let Some(v) = get(k) {
                    return Sourced { value: v, source: Source::Host(name.clone()) };
                }
            }
            match get(defaults) {
                Some(v) => Sourced { value: v, source: Source::Defaults },
                None => Sourced { value: builtin, source: Source::Builtin },
            }
        }
        let d = &self.defaults;
        Resolved {
            parallel: pick(flags, &sections, d, |k| k.parallel.map(Choice::value), None),
            tcp_buffer: pick(flags, &sections, d, |k| k.tcp_buffer.map(Choice::value), None),
            block_size: pick(flags, &sections, d, |k| k.block_size, ferry_io::mode_e::DEFAULT_BLOCK_SIZE as u64),
            staging: pick(flags, &sections, d, |k| k.staging.map(Choice::value), None),
        }
    }

    /// Writes `knobs` into the section `[hosts."<name>"]` of the file at
    /// `path` (created with its directory if missing), replacing those
    /// keys and keeping everything else, comments included. `note` becomes
    /// a comment above the section.
    pub fn write_host(path: &Path, name: &str, knobs: &Knobs, note: &str) -> Result<(), ConfigError> {
        let p = || path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => return Err(ConfigError::Read { path: p(), error }),
        };
        // Refuse to rewrite a file that would not load afterwards anyway.
        Self::parse(&text, path)?;
        let mut doc: toml_edit::DocumentMut =
            text.parse().map_err(|e: toml_edit::TomlError| ConfigError::Parse { path: p(), message: e.to_string() })?;
        let hosts = doc.entry("hosts").or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        });
        let Some(hosts) = hosts.as_table_mut() else {
            return Err(ConfigError::Parse { path: p(), message: "\"hosts\" must be a table".into() });
        };
        let section = hosts.entry(name).or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
        let Some(section) = section.as_table_mut() else {
            return Err(ConfigError::Parse { path: p(), message: format!("hosts.\"{name}\" must be a table") });
        };
        let size = |c: Choice<u64>, word: &str| match c {
            Choice::Builtin => toml_edit::value(word),
            Choice::Value(n) => toml_edit::value(format_size(n)),
        };
        if let Some(c) = knobs.parallel {
            section["parallel"] = match c {
                Choice::Builtin => toml_edit::value("auto"),
                Choice::Value(n) => toml_edit::value(i64::from(n)),
            };
        }
        if let Some(c) = knobs.tcp_buffer {
            section["tcp_buffer"] = size(c, "auto");
        }
        if let Some(n) = knobs.block_size {
            section["block_size"] = toml_edit::value(format_size(n));
        }
        if let Some(c) = knobs.staging {
            section["staging"] = size(c, "off");
        }
        if !note.is_empty() {
            // The user's comments above the section stay; an earlier
            // `ferry tune` note (from its first line on) is replaced.
            let old = section.decor().prefix().and_then(|p| p.as_str()).unwrap_or("").to_string();
            let keep = match old.find("# ferry tune") {
                Some(i) => &old[..i],
                None => old.as_str(),
            };
            let keep = keep.trim_end_matches('\n');
            let comment: String = note.lines().map(|l| format!("# {l}\n")).collect();
            let prefix = if keep.is_empty() { format!("\n{comment}") } else { format!("{keep}\n{comment}") };
            section.decor_mut().set_prefix(prefix);
        }
        let out = doc.to_string();
        Self::parse(&out, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|error| ConfigError::Read { path: dir.display().to_string(), error })?;
        }
        // Write beside and rename: a crash leaves the old file or the new one.
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, out).map_err(|error| ConfigError::Read { path: tmp.display().to_string(), error })?;
        std::fs::rename(&tmp, path).map_err(|error| ConfigError::Read { path: p(), error })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
# mine
[defaults]
parallel = 4
tcp_buffer = "auto"
block_size = "2M"

[hosts."data.example.org:2811"]
parallel = 8
tcp_buffer = "16M"

[hosts."data.example.org"]
staging = "8M"

[hosts."other.example.org:2811"]
parallel = "auto"
staging = "off"
"#;

    fn cfg() -> ClientConfig {
        ClientConfig::parse(FILE, Path::new("client.toml")).unwrap()
    }

    #[test]
    fn parses_sizes_words_and_sections() {
        let c = cfg();
        assert_eq!(c.defaults.parallel, Some(Choice::Value(4)));
        assert_eq!(c.defaults.tcp_buffer, Some(Choice::Builtin));
        assert_eq!(c.defaults.block_size, Some(2 << 20));
        let h = &c.hosts["data.example.org:2811"];
        assert_eq!(h.tcp_buffer, Some(Choice::Value(16 << 20)));
        assert_eq!(c.hosts["other.example.org:2811"].staging, Some(Choice::Builtin));
        assert_eq!(ClientConfig::parse("", Path::new("x")).unwrap().hosts.len(), 0);
    }

    #[test]
    fn flags_beat_host_sections_beat_defaults_beat_builtin() {
        let c = cfg();
        let r = c.resolve(&[("DATA.example.org", 2811)], &Knobs::default());
        assert_eq!(r.parallel, Sourced { value: Some(8), source: Source::Host("data.example.org:2811".into()) });
        assert_eq!(r.tcp_buffer.value, Some(16 << 20));
        // Not in host:port, but in the host's any-port section.
        assert_eq!(r.staging, Sourced { value: Some(8 << 20), source: Source::Host("data.example.org".into()) });
        assert_eq!(r.block_size, Sourced { value: 2 << 20, source: Source::Defaults });
        assert!(r.uses_config());

        let flags = Knobs { parallel: Some(Choice::Value(2)), staging: Some(Choice::Builtin), ..Knobs::default() };
        let r = c.resolve(&[("data.example.org", 2811)], &flags);
        assert_eq!(r.parallel, Sourced { value: Some(2), source: Source::Flag });
        assert_eq!(r.staging, Sourced { value: None, source: Source::Flag });

        // Another port of the same host: only the any-port section and defaults.
        let r = c.resolve(&[("data.example.org", 2812)], &Knobs::default());
        assert_eq!(r.parallel, Sourced { value: Some(4), source: Source::Defaults });
        assert_eq!(r.tcp_buffer, Sourced { value: None, source: Source::Defaults });

        // "auto" in a host section overrides a number in [defaults].
        let r = c.resolve(&[("other.example.org", 2811)], &Knobs::default());
        assert_eq!(r.parallel, Sourced { value: None, source: Source::Host("other.example.org:2811".into()) });

        // Nothing configured: built-in behaviour.
        let r = ClientConfig::default().resolve(&[("x", 21)], &Knobs::default());
        assert_eq!(r.parallel, Sourced { value: None, source: Source::Builtin });
        assert_eq!(r.block_size.value, 1 << 20);
        assert!(!r.uses_config());
    }

    #[test]
    fn the_source_server_comes_before_the_destination() {
        let c = cfg();
        let r = c.resolve(&[("other.example.org", 2811), ("data.example.org", 2811)], &Knobs::default());
        assert_eq!(r.parallel.source, Source::Host("other.example.org:2811".into()));
        assert_eq!(r.tcp_buffer.source, Source::Host("data.example.org:2811".into()));
    }

    #[test]
    fn bad_values_name_the_section_and_the_key() {
        for (text, want) in [
            ("[defaults]\nparallel = 0", "[defaults]: parallel must be 1 to 64"),
            ("[defaults]\nparallel = \"many\"", "parallel must be"),
            ("[hosts.\"h:1\"]\ntcp_buffer = \"lots\"", "[hosts.\"h:1\"]: tcp_buffer"),
            ("[defaults]\nstaging = \"128M\"", "staging must be at most 64M"),
            ("[defaults]\nblock_size = \"auto\"", "block_size must be"),
            ("[defaults]\nstreams = 4", "unknown field"),
            ("[defaults\n", "client.toml"),
        ] {
            let e = ClientConfig::parse(text, Path::new("client.toml")).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn sizes_format_so_they_read_back() {
        for n in [1u64, 4096, 1536 << 10, 16 << 20, 3 << 30, 7_500_000] {
            assert_eq!(parse_size(&format_size(n)).unwrap(), n);
        }
        assert_eq!(format_size(16 << 20), "16M");
        assert_eq!(parse_size("1.5M").unwrap(), 1536 << 10);
    }

    #[test]
    fn write_host_keeps_the_rest_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("client.toml");
        let knobs = Knobs { parallel: Some(Choice::Value(4)), tcp_buffer: Some(Choice::Builtin), ..Knobs::default() };
        ClientConfig::write_host(&path, "h.example:2811", &knobs, "ferry tune: 940 Mbit/s").unwrap();
        std::fs::write(&path, format!("# keep me\n{}", std::fs::read_to_string(&path).unwrap())).unwrap();
        let knobs2 =
            Knobs { parallel: Some(Choice::Value(8)), staging: Some(Choice::Value(8 << 20)), ..Knobs::default() };
        ClientConfig::write_host(&path, "h.example:2811", &knobs2, "again").unwrap();
        ClientConfig::write_host(&path, "other:21", &knobs, "").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("# keep me"), "{text}");
        assert!(text.contains("# again"), "{text}");
        let c = ClientConfig::parse(&text, &path).unwrap();
        let h = &c.hosts["h.example:2811"];
        assert_eq!(h.parallel, Some(Choice::Value(8)));
        assert_eq!(h.tcp_buffer, Some(Choice::Builtin));
        assert_eq!(h.staging, Some(Choice::Value(8 << 20)));
        assert_eq!(c.hosts["other:21"].parallel, Some(Choice::Value(4)));
        // A file that does not parse is left alone.
        std::fs::write(&path, "[defaults]\nparallel = 0\n").unwrap();
        assert!(ClientConfig::write_host(&path, "h:1", &knobs, "").is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[defaults]\nparallel = 0\n");
    }
}
