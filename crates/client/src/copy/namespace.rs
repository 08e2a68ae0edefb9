//! Questions about and changes to the name space on either side: facts of
//! a path, where a file lands, directory listings (MLSD or LIST, read in
//! stream mode), MKD and `mkdir -p`, DELE/RMD, and a copied file's
//! mode and time on a server (MFMT or `SITE UTIME`, `SITE CHMOD`).

use super::{local_err, remote_join, Client, FileMeta};
use crate::control::{refused, ControlChannel};
use crate::error::ClientError;
use crate::location::{Location, RemoteUrl};
use ferry_io::transport::DataConn;
use ferry_proto::command::{Command, SiteCommand, TransferType};
use ferry_proto::facts::{format_time_val, FileFacts, FileKind};
use std::net::SocketAddr;
use std::time::Duration;

impl Client {
    pub(super) async fn facts(&mut self, loc: &Location) -> Result<Option<FileFacts>, ClientError> {
        match loc {
            Location::Local(p) => match std::fs::metadata(p) {
                Ok(md) => Ok(Some(ferry_io::root::local_facts(
                    p.file_name().map(ferry_io::root::local_name).unwrap_or_default(),
                    md,
                ))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(ClientError::local(p.display(), e)),
            },
            Location::Remote(u) => {
                // The first question to a server rides along with the login.
                let s = self.open_session(u, false, Some(&u.path)).await?;
                match s.take_probe(&u.path) {
                    Some(facts) => Ok(facts),
                    None => self.connection(u).await?.stat(&u.path).await,
                }
            }
        }
    }

    pub(super) async fn resolve_destination(
        &mut self,
        src: &Location,
        dst: &Location,
    ) -> Result<Location, ClientError> {
        let name = match src {
            Location::Local(p) => p.file_name().map(ferry_io::root::local_name),
            Location::Remote(u) => u.file_name().map(str::to_string),
        };
        let Some(name) = name else { return Ok(dst.clone()) };
        let into_dir = match dst {
            Location::Local(p) => p.is_dir(),
            Location::Remote(u) if u.is_dir_url() => true,
            Location::Remote(_) => matches!(self.facts(dst).await?, Some(f) if f.kind == FileKind::Dir),
        };
        Ok(match (into_dir, dst) {
            (false, d) => d.clone(),
            (true, Location::Local(p)) => Location::Local(p.join(ferry_io::root::local_os_name(&name))),
            (true, Location::Remote(u)) => Location::Remote(u.with_path(remote_join(&u.path, &name))),
        })
    }

    /// Entries of a directory, without `.`/`..`, sorted by name.
    pub async fn read_dir(&mut self, loc: &Location) -> Result<Vec<FileFacts>, ClientError> {
        match loc {
            Location::Local(p) => {
                let mut out = Vec::new();
                for entry in std::fs::read_dir(p).map_err(local_err(p))? {
                    let entry = entry.map_err(local_err(p))?;
                    // Follow links, as the remote side does.
                    let md = std::fs::metadata(entry.path()).or_else(|_| entry.metadata()).map_err(local_err(p))?;
                    out.push(ferry_io::root::local_facts(ferry_io::root::local_name(&entry.file_name()), md));
                }
                out.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(out)
            }
            Location::Remote(u) => {
                let timeout = self.opts.timeout;
                let path = u.path.clone();
                let s = self.session_for(u, true).await?;
                list_remote(&mut s.ctrl, &path, timeout).await
            }
        }
    }

    /// Creates the directories above `loc` that are missing (`mkdir -p`
    /// of its parent), so `ferry cp -r tree ftp://host/new/place` works.
    /// Errors surface when `loc` itself is made.
    pub(super) async fn make_parents(&mut self, loc: &Location) {
        match loc {
            Location::Local(p) => {
                if let Some(parent) = p.parent().filter(|p| !p.as_os_str().is_empty()) {
                    let _ = std::fs::create_dir_all(parent);
                }
            }
            Location::Remote(u) => {
                let comps: Vec<&str> = u.path.split('/').filter(|c| !c.is_empty()).collect();
                if comps.len() < 2 {
                    return;
                }
                let parent = format!("/{}", comps[..comps.len() - 1].join("/"));
                let Ok(c) = self.connection(u).await else { return };
                if matches!(c.stat(&parent).await, Ok(Some(_))) {
                    return;
                }
                let mut path = String::new();
                for comp in &comps[..comps.len() - 1] {
                    path.push('/');
                    path.push_str(comp);
                    let _ = c.command(&Command::Mkd(path.clone())).await;
                }
            }
        }
    }

    /// Makes sure the directory exists; true if it existed before.
    pub(super) async fn make_dir_exist(&mut self, loc: &Location) -> Result<bool, ClientError> {
        match loc {
            Location::Local(p) => match std::fs::create_dir(p) {
                Ok(()) => Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && p.is_dir() => Ok(true),
                Err(e) => Err(ClientError::local(p.display(), e)),
            },
            Location::Remote(u) => {
                let path = u.path.trim_end_matches('/').to_string();
                let c = self.connection(u).await?;
                let cmd = Command::Mkd(path.clone());
                let r = c.command(&cmd).await?;
                if r.code.get() == 257 {
                    return Ok(false);
                }
                match c.stat(&path).await? {
                    Some(f) if f.kind == FileKind::Dir => Ok(true),
                    _ => Err(refused(&cmd, r)),
                }
            }
        }
    }

    pub async fn make_dir(&mut self, url: &RemoteUrl) -> Result<(), ClientError> {
        let path = url.path.trim_end_matches('/').to_string();
        self.connection(url).await?.expect(&Command::Mkd(path)).await.map(|_| ())
    }

    /// Removes a file, or a directory (with its contents when
    /// `recursive`), adding each path removed to `removed` as it goes, so
    /// that a removal stopped half-way can say exactly what is gone.
    ///
    /// The top of the user's tree (`ftp://host/`, or any path that comes
    /// to it) is refused unless `force`: one mistyped command would
    /// otherwise empty an account.
    pub async fn remove(
        &mut self,
        url: &RemoteUrl,
        recursive: bool,
        force: bool,
        removed: &mut Vec<String>,
    ) -> Result<(), ClientError> {
        let is_root = url.path.split('/').all(|c| c.is_empty() || c == ".");
        if is_root && !force {
            return Err(ClientError::Usage(format!(
                "{url} is the top of your tree on that server; refusing to remove it (add --force if you mean it)"
            )));
        }
        let path = url.path.trim_end_matches('/').to_string();
        let path = if path.is_empty() { "/".to_string() } else { path };
        let facts = self.connection(url).await?.stat(&path).await?;
        match facts {
            None => Err(ClientError::Usage(format!("{url}: no such file or directory on the server"))),
            Some(f) if f.kind == FileKind::Dir => {
                let entries = self.read_dir(&Location::Remote(url.clone())).await?;
                if !recursive && !entries.is_empty() {
                    return Err(ClientError::Usage(format!("{url} is a directory that is not empty; use -r")));
                }
                for e in entries {
                    let child = url.with_path(remote_join(&path, &e.name));
                    Box::pin(self.remove(&child, true, true, removed)).await?;
                }
                if is_root {
                    // The top itself stays: it is the account's home.
                    return Ok(());
                }
                self.connection(url).await?.expect(&Command::Rmd(path.clone())).await?;
                removed.push(format!("{path}/"));
                Ok(())
            }
            Some(_) => {
                self.connection(url).await?.expect(&Command::Dele(path.clone())).await?;
                removed.push(path);
                Ok(())
            }
        }
    }
}

/// Opens a stream-mode data connection for a bare control channel (a
/// listing), in TLS when the session has PROT P.
pub(super) async fn connect_data(
    c: &ControlChannel,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<DataConn, ClientError> {
    let opts = ferry_io::transport::ChannelOptions {
        protection: c.data_protection(),
        ..ferry_io::transport::ChannelOptions::new(timeout)
    };
    crate::session::connect_with(&opts, addr).await
}

/// Reads a directory listing in stream mode: MLSD where the server has it,
/// LIST otherwise.
pub(crate) async fn list_remote(
    c: &mut ControlChannel,
    path: &str,
    timeout: Duration,
) -> Result<Vec<FileFacts>, ClientError> {
    c.set_type(TransferType::Ascii).await?;
    let addr = c.passive().await?;
    let mut data = connect_data(c, addr, timeout).await?;
    let mlsd = c.features.has("MLST");
    let cmd = if mlsd { Command::Mlsd(Some(path.to_string())) } else { Command::List(Some(path.to_string())) };
    c.send(&cmd).await?;
    let r = c.reply().await?;
    if !r.code.is_preliminary() {
        return Err(refused(&cmd, r));
    }
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::new();
        // Bound a listing: a hostile server cannot exhaust memory.
        (&mut data).take(ferry_proto::client::listing::MAX_LISTING).read_to_end(&mut out)?;
        Ok(out)
    });
    let r = c.reply_untimed().await?;
    if !r.code.is_positive_completion() {
        return Err(refused(&cmd, r));
    }
    let bytes =
        read.await.map_err(|e| ClientError::Data(e.to_string()))?.map_err(|e| ClientError::Data(e.to_string()))?;
    Ok(ferry_proto::client::listing::parse_listing(&bytes, mlsd))
}

impl Client {
    /// Gives files on a server their source's modification time (MFMT,
    /// or `SITE UTIME` where FEAT has no MFMT) and permission bits (`SITE
    /// CHMOD`), all in one write. A server that refuses is not asked
    /// again; a refusal is a warning, not a failed copy.
    pub(super) async fn set_remote_meta(&mut self, dst: &RemoteUrl, items: &[(String, FileFacts)]) {
        let Ok(session) = self.session(dst).await else { return };
        if session.settle().await.is_err() {
            return;
        }
        let mfmt = session.ctrl.features.has("MFMT");
        let mut cmds = Vec::new();
        for (path, f) in items {
            let meta = FileMeta::of(f);
            if let Some(t) = meta.modified {
                if mfmt {
                    cmds.push((Command::Mfmt { time: format_time_val(t), path: path.clone() }, "utime"));
                } else if session.utime_works != Some(false) {
                    // Globus's form: SITE UTIME <time-val> <path>.
                    let args = format!("{} {path}", format_time_val(t));
                    cmds.push((Command::Site(SiteCommand::Other { name: "UTIME".into(), args }), "utime"));
                }
            }
            if let (Some(mode), true) = (meta.mode, session.chmod_works != Some(false)) {
                cmds.push((Command::Site(SiteCommand::Chmod { mode, path: path.clone() }), "chmod"));
            }
        }
        if cmds.is_empty() {
            return;
        }
        let batch: Vec<Command> = cmds.iter().map(|(c, _)| c.clone()).collect();
        if session.ctrl.send_batch(&batch).await.is_err() {
            return;
        }
        let mut warned = false;
        for (cmd, what) in &cmds {
            let Ok(r) = session.ctrl.reply().await else { return };
            let ok = r.code.is_positive_completion();
            let flag = if *what == "chmod" { &mut session.chmod_works } else { &mut session.utime_works };
            if !ok && matches!(r.code.get(), 500 | 502 | 504) {
                *flag = Some(false);
            } else if ok {
                *flag = Some(true);
            }
            if !ok && !warned {
                warned = true;
                tracing::warn!(server = %dst, command = %cmd, reply = %r.code.get(), "the server did not keep a file's time or mode");
            }
        }
    }
}
