//! The client's sessions: one logged-in [`ServerSession`] per server,
//! reused across the files of a copy, plus one for listings (so they do
//! not disturb cached data channels) and a second one to the same server
//! for a third-party copy within it. A session that broke is reopened on
//! next use.

use super::{Client, ModeChoice};
use crate::control::ControlChannel;
use crate::error::ClientError;
use crate::location::{Location, RemoteUrl, Scheme};
use crate::resume::ResumeState;
use crate::session::{ChannelOptions, ServerSession};

impl Client {
    pub(super) fn channel_options(&self) -> ChannelOptions {
        ChannelOptions {
            timeout: self.opts.timeout,
            parallelism: self.opts.parallelism,
            tcp_buffer: self.opts.tcp_buffer,
            block_size: self.opts.block_size,
            streams: self.opts.streams.clone(),
            tls: self.tls.clone(),
            transport: self.opts.transport.clone(),
            path_rate: self.opts.path_rate,
            path_cache: self.opts.path_cache.clone(),
            max_rate: self.opts.max_rate.map(|r| r as f64),
        }
    }

    /// Loads the TLS configuration the first time an `ftps://` URL needs it.
    pub(super) fn prepare_tls(&mut self, url: &RemoteUrl) -> Result<(), ClientError> {
        if url.scheme == crate::location::Scheme::Ftps && self.tls.is_none() {
            self.tls = Some(self.opts.tls.client_config()?);
        }
        Ok(())
    }

    /// `url` with its password from the credential sources. An `ftps://`
    /// login with a client certificate (`--cert`) needs none: the server
    /// maps the certificate to the user.
    pub(super) fn credentials_for(&self, url: &RemoteUrl) -> Result<RemoteUrl, ClientError> {
        match self.opts.credentials.complete(url) {
            Err(crate::credentials::CredentialError::Missing { .. })
                if url.scheme == crate::location::Scheme::Ftps && self.opts.tls.cert.is_some() =>
            {
                Ok(url.clone())
            }
            r => Ok(r?),
        }
    }

    /// The logged-in session for `url`'s server (`listing` for the separate
    /// one that serves listings).
    pub(super) async fn session_for(
        &mut self,
        url: &RemoteUrl,
        listing: bool,
    ) -> Result<&mut ServerSession, ClientError> {
        self.open_session(url, listing, None).await
    }

    /// The session for `url`'s server, opened (with `probe` riding along
    /// with the login) if there is none or the last one broke.
    pub(super) async fn open_session(
        &mut self,
        url: &RemoteUrl,
        listing: bool,
        probe: Option<&str>,
    ) -> Result<&mut ServerSession, ClientError> {
        let k = format!("{}{}", key(url), if listing { "#list" } else { "" });
        self.open_keyed(url, k, probe).await
    }

    pub(super) async fn open_keyed(
        &mut self,
        url: &RemoteUrl,
        k: String,
        probe: Option<&str>,
    ) -> Result<&mut ServerSession, ClientError> {
        if self.sessions.get(&k).is_some_and(ServerSession::is_broken) {
            self.sessions.remove(&k);
        }
        if !self.sessions.contains_key(&k) {
            self.prepare_tls(url)?;
            let url = &self.credentials_for(url)?;
            let mut s = ServerSession::open(url, self.channel_options(), probe).await?;
            s.stagger_first_line(self.line_share);
            self.sessions.insert(k.clone(), s);
        }
        Ok(self.sessions.get_mut(&k).expect("inserted above"))
    }

    pub async fn session(&mut self, url: &RemoteUrl) -> Result<&mut ServerSession, ClientError> {
        self.session_for(url, false).await
    }

    /// The pool keys of a third-party pair: a copy within one server
    /// needs two sessions to it.
    pub(super) fn pair_keys(src: &RemoteUrl, dst: &RemoteUrl) -> (String, String) {
        let d = if src.same_endpoint(dst) { format!("{}#dst", key(dst)) } else { key(dst) };
        (key(src), d)
    }

    /// Both sessions of a third-party copy, taken out of the pool (give
    /// them back with [`put_pair`](Self::put_pair)).
    pub(crate) async fn take_pair(
        &mut self,
        src: &RemoteUrl,
        dst: &RemoteUrl,
    ) -> Result<(ServerSession, ServerSession), ClientError> {
        let (ks, kd) = Self::pair_keys(src, dst);
        self.open_keyed(src, ks.clone(), None).await?;
        self.open_keyed(dst, kd.clone(), None).await?;
        let s = self.sessions.remove(&ks).expect("opened above");
        let d = self.sessions.remove(&kd).expect("opened above");
        Ok((s, d))
    }

    pub(crate) fn put_pair(&mut self, src: &RemoteUrl, dst: &RemoteUrl, s: ServerSession, d: ServerSession) {
        let (ks, kd) = Self::pair_keys(src, dst);
        self.sessions.insert(ks, s);
        self.sessions.insert(kd, d);
    }

    /// The logged-in control connection for `url`'s server.
    pub async fn connection(&mut self, url: &RemoteUrl) -> Result<&mut ControlChannel, ClientError> {
        self.session_for(url, false).await?.settle().await?;
        // Settling may have found the session unusable: then it reopens.
        Ok(&mut self.session_for(url, false).await?.ctrl)
    }

    pub(super) fn forget(&mut self, url: &RemoteUrl) {
        self.sessions.remove(&key(url));
    }

    /// Closes every control connection politely.
    pub async fn close(mut self) {
        for (_, s) in self.sessions.drain() {
            s.ctrl.quit().await;
        }
    }

    pub(super) async fn use_mode_e(&mut self, url: &RemoteUrl) -> Result<bool, ClientError> {
        let mode = self.opts.mode;
        let s = self.session(url).await?;
        match mode {
            ModeChoice::Stream => Ok(false),
            ModeChoice::Auto => Ok(s.supports_mode_e()),
            ModeChoice::Extended if s.supports_mode_e() => Ok(true),
            ModeChoice::Extended => Err(ClientError::Usage(format!(
                "{url}: the server does not offer GridFTP extended block mode (no PARALLEL in FEAT)"
            ))),
        }
    }

    /// Opens the session for a download with its RETR in the login's
    /// write (see [`ServerSession::open_retrieving`]) when nothing calls
    /// for a question first: a remote file to a local path, MODE E allowed,
    /// no restart record to consult, IPv4, and no transport to negotiate
    /// but `quic` named outright on an `ftps://` server or `udt` on an
    /// `ftp://` one (its `TPRT` — and for `udt` Globus's `SITE
    /// SETNETSTACK` — rides in the same write, ahead of the set-up: see
    /// [`ServerSession::open_retrieving`]). `auto` needs what the login
    /// measures; encrypted `udt` asks for its sealed form first.
    pub(super) async fn pipeline_download(&mut self, src: &Location, dst: &Location) -> Result<(), ClientError> {
        let (Location::Remote(u), Location::Local(d)) = (src, dst) else { return Ok(()) };
        let Some(name) = u.file_name() else { return Ok(()) };
        let transport_pipelines = match self.opts.transport.as_deref() {
            None => true,
            Some(t) => {
                t.eq_ignore_ascii_case("tcp")
                    || (t.eq_ignore_ascii_case("quic") && u.scheme == Scheme::Ftps)
                    || (t.eq_ignore_ascii_case("udt") && u.scheme == Scheme::Ftp)
            }
        };
        if u.is_dir_url()
            || !transport_pipelines
            || self.opts.mode == ModeChoice::Stream
            || self.opts.pipeline <= 1
            || self.sessions.contains_key(&key(u))
            || u.host.contains(':')
        {
            return Ok(());
        }
        let target = if d.is_dir() { d.join(name) } else { d.clone() };
        if self.opts.resume
            && (self.opts.restart_store.is_some()
                || ResumeState::exists(&src.to_string(), &Location::Local(target).to_string()))
        {
            return Ok(());
        }
        self.prepare_tls(u)?;
        let full = self.credentials_for(u)?;
        let s = ServerSession::open_retrieving(&full, self.channel_options(), &u.path).await?;
        self.sessions.insert(key(u), s);
        Ok(())
    }

    /// How each server's data channels were sized, for reports.
    /// The transport each server's data channels used.
    pub fn transports(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .sessions
            .values()
            .map(|s| (s.url.with_path(String::new()).to_string(), s.transport_name().to_string()))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// What `--transport auto` chose for each server, and why.
    pub fn transport_choices(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .sessions
            .values()
            .filter_map(|s| Some((s.url.with_path(String::new()).to_string(), s.transport_choice.clone()?)))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    pub fn sizing(&self) -> Vec<(String, f64, String)> {
        self.sessions
            .iter()
            .filter(|(k, _)| !k.ends_with("#list"))
            .map(|(_, s)| (s.url.with_path(String::new()).to_string(), s.rtt.as_secs_f64() * 1e3, s.sizing.clone()))
            .collect()
    }
}

pub(super) fn key(u: &RemoteUrl) -> String {
    format!("{:?}://{}@{}:{}", u.scheme, u.user, u.host, u.port)
}
