//! Copies between local paths and servers, one file or a tree.
//!
//! Every destination file is written under a partial name and renamed when
//! complete — locally `.<name>.ferry-part`, on Ferry servers by the server
//! itself — so an interrupted copy never leaves a truncated file under the
//! final name. Special files (`/dev/null`) are written directly.

use crate::control::{parse_list_line, parse_mlsx, refused, ControlChannel};
use crate::error::ClientError;
use crate::location::{Location, RemoteUrl};
use ferry_io::stream::{self, AbortSignal, CopyError};
use ferry_proto::command::{Command, TransferType};
use ferry_proto::facts::{FileFacts, FileKind};
use std::collections::HashMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Shared counters a progress display reads while a copy runs.
#[derive(Debug, Default)]
pub struct Stats {
    /// Payload bytes moved so far (all files).
    pub bytes: Arc<AtomicU64>,
    /// Bytes expected in total, as far as known.
    pub expected: AtomicU64,
    pub files_done: AtomicU64,
    pub current: Mutex<String>,
}

impl Stats {
    fn begin(&self, name: &str, size: Option<u64>) {
        if let Some(s) = size {
            self.expected.fetch_add(s, Ordering::Relaxed);
        }
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = name.to_string();
    }
}

#[derive(Debug, Clone)]
pub struct CopyOptions {
    pub recursive: bool,
    /// Limit for each control-channel exchange and data-connection stall.
    pub timeout: Duration,
}

impl Default for CopyOptions {
    fn default() -> Self {
        Self {
            recursive: false,
            timeout: Duration::from_secs(60),
        }
    }
}

/// What a finished copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopySummary {
    pub files: u64,
    pub bytes: u64,
    pub dirs: u64,
}

/// A client session: holds one control connection per server, reused across
/// the files of a copy.
#[derive(Debug)]
pub struct Client {
    opts: CopyOptions,
    stats: Arc<Stats>,
    conns: HashMap<String, ControlChannel>,
}

fn key(u: &RemoteUrl) -> String {
    format!("{:?}://{}@{}:{}", u.scheme, u.user, u.host, u.port)
}

fn local_err(path: &Path) -> impl Fn(std::io::Error) -> ClientError + '_ {
    move |e| ClientError::local(path.display(), e)
}

/// Joins a remote directory path and a name.
fn remote_join(dir: &str, name: &str) -> String {
    format!("{}/{}", dir.trim_end_matches('/'), name)
}

impl Client {
    pub fn new(opts: CopyOptions) -> Self {
        Self {
            opts,
            stats: Arc::new(Stats::default()),
            conns: HashMap::new(),
        }
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// The logged-in control connection for `url`'s server.
    pub async fn connection(
        &mut self,
        url: &RemoteUrl,
    ) -> Result<&mut ControlChannel, ClientError> {
        let k = key(url);
        if !self.conns.contains_key(&k) {
            if url.scheme == crate::location::Scheme::Ftps {
                return Err(ClientError::Usage("ftps:// is not supported yet".into()));
            }
            let mut c = ControlChannel::connect(&url.host, url.port, self.opts.timeout).await?;
            c.login(&url.user, &url.password).await?;
            self.conns.insert(k.clone(), c);
        }
        Ok(self.conns.get_mut(&k).expect("inserted above"))
    }

    /// Closes every control connection politely.
    pub async fn close(mut self) {
        for (_, c) in self.conns.drain() {
            c.quit().await;
        }
    }

    /// Copies `src` to `dst`. A destination that is an existing directory
    /// (or a URL ending in `/`) receives the source under its own name.
    pub async fn copy(
        &mut self,
        src: &Location,
        dst: &Location,
    ) -> Result<CopySummary, ClientError> {
        let src_facts = self.facts(src).await?.ok_or_else(|| match src {
            Location::Local(p) => {
                ClientError::local(p.display(), std::io::ErrorKind::NotFound.into())
            }
            Location::Remote(u) => {
                ClientError::Usage(format!("{u}: no such file or directory on the server"))
            }
        })?;
        let dst = self.resolve_destination(src, dst).await?;
        let mut summary = CopySummary::default();
        if src_facts.kind == FileKind::Dir {
            if !self.opts.recursive {
                return Err(ClientError::Usage(format!(
                    "{src} is a directory; use -r to copy a tree"
                )));
            }
            Box::pin(self.copy_tree(src, &dst, &mut summary)).await?;
        } else {
            let n = self.copy_file(src, &dst, Some(src_facts.size)).await?;
            summary.files += 1;
            summary.bytes += n;
        }
        Ok(summary)
    }

    async fn facts(&mut self, loc: &Location) -> Result<Option<FileFacts>, ClientError> {
        match loc {
            Location::Local(p) => match std::fs::metadata(p) {
                Ok(md) => Ok(Some(FileFacts {
                    name: p
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    kind: if md.is_dir() {
                        FileKind::Dir
                    } else {
                        FileKind::File
                    },
                    size: md.len(),
                    modified: 0,
                    mode: 0,
                    uid: 0,
                    gid: 0,
                    nlink: 1,
                    unique: (0, 0),
                })),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(ClientError::local(p.display(), e)),
            },
            Location::Remote(u) => {
                let path = u.path.clone();
                let c = self.connection(u).await?;
                c.stat(&path).await
            }
        }
    }

    async fn resolve_destination(
        &mut self,
        src: &Location,
        dst: &Location,
    ) -> Result<Location, ClientError> {
        let name = match src {
            Location::Local(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()),
            Location::Remote(u) => u.file_name().map(str::to_string),
        };
        let Some(name) = name else {
            return Ok(dst.clone());
        };
        let into_dir = match dst {
            Location::Local(p) => p.is_dir(),
            Location::Remote(u) if u.is_dir_url() => true,
            Location::Remote(_) => {
                matches!(self.facts(dst).await?, Some(f) if f.kind == FileKind::Dir)
            }
        };
        Ok(match (into_dir, dst) {
            (false, d) => d.clone(),
            (true, Location::Local(p)) => Location::Local(p.join(&name)),
            (true, Location::Remote(u)) => {
                Location::Remote(u.with_path(remote_join(&u.path, &name)))
            }
        })
    }

    async fn copy_tree(
        &mut self,
        src: &Location,
        dst: &Location,
        summary: &mut CopySummary,
    ) -> Result<(), ClientError> {
        self.make_dir_exist(dst).await?;
        summary.dirs += 1;
        let entries = self.read_dir(src).await?;
        for e in entries {
            let (s, d) = match (src, dst) {
                (Location::Local(a), Location::Local(b)) => (
                    Location::Local(a.join(&e.name)),
                    Location::Local(b.join(&e.name)),
                ),
                (Location::Local(a), Location::Remote(b)) => (
                    Location::Local(a.join(&e.name)),
                    Location::Remote(b.with_path(remote_join(&b.path, &e.name))),
                ),
                (Location::Remote(a), Location::Local(b)) => (
                    Location::Remote(a.with_path(remote_join(&a.path, &e.name))),
                    Location::Local(b.join(&e.name)),
                ),
                (Location::Remote(a), Location::Remote(b)) => (
                    Location::Remote(a.with_path(remote_join(&a.path, &e.name))),
                    Location::Remote(b.with_path(remote_join(&b.path, &e.name))),
                ),
            };
            match e.kind {
                FileKind::Dir => Box::pin(self.copy_tree(&s, &d, summary)).await?,
                FileKind::File => {
                    summary.bytes += self.copy_file(&s, &d, Some(e.size)).await?;
                    summary.files += 1;
                }
                _ => tracing::warn!(path = %s, "skipping: not a regular file or directory"),
            }
        }
        Ok(())
    }

    /// Entries of a directory, without `.`/`..`, sorted by name.
    pub async fn read_dir(&mut self, loc: &Location) -> Result<Vec<FileFacts>, ClientError> {
        match loc {
            Location::Local(p) => {
                let mut out = Vec::new();
                for entry in std::fs::read_dir(p).map_err(local_err(p))? {
                    let entry = entry.map_err(local_err(p))?;
                    let md = entry.metadata().map_err(local_err(p))?;
                    let ft = std::fs::metadata(entry.path())
                        .map(|m| m.file_type())
                        .unwrap_or(md.file_type());
                    out.push(FileFacts {
                        name: entry.file_name().to_string_lossy().into_owned(),
                        kind: if ft.is_dir() {
                            FileKind::Dir
                        } else if ft.is_file() {
                            FileKind::File
                        } else {
                            FileKind::Other
                        },
                        size: md.len(),
                        modified: 0,
                        mode: 0,
                        uid: 0,
                        gid: 0,
                        nlink: 1,
                        unique: (0, 0),
                    });
                }
                out.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(out)
            }
            Location::Remote(u) => {
                let timeout = self.opts.timeout;
                let path = u.path.clone();
                let c = self.connection(u).await?;
                list_remote(c, &path, timeout).await
            }
        }
    }

    async fn make_dir_exist(&mut self, loc: &Location) -> Result<(), ClientError> {
        match loc {
            Location::Local(p) => match std::fs::create_dir(p) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && p.is_dir() => Ok(()),
                Err(e) => Err(ClientError::local(p.display(), e)),
            },
            Location::Remote(u) => {
                let path = u.path.trim_end_matches('/').to_string();
                let c = self.connection(u).await?;
                let cmd = Command::Mkd(path.clone());
                let r = c.command(&cmd).await?;
                if r.code.get() == 257 {
                    return Ok(());
                }
                match c.stat(&path).await? {
                    Some(f) if f.kind == FileKind::Dir => Ok(()),
                    _ => Err(refused(&cmd, r)),
                }
            }
        }
    }

    /// Copies one file; returns the bytes moved.
    pub async fn copy_file(
        &mut self,
        src: &Location,
        dst: &Location,
        size: Option<u64>,
    ) -> Result<u64, ClientError> {
        self.stats.begin(&src.to_string(), size);
        let n = match (src, dst) {
            (Location::Local(s), Location::Local(d)) => copy_local(s, d, &self.stats)?,
            (Location::Remote(s), Location::Local(d)) => self.download(s, d, size).await?,
            (Location::Local(s), Location::Remote(d)) => self.upload(s, d).await?,
            (Location::Remote(s), Location::Remote(d)) => self.third_party(s, d).await?,
        };
        self.stats.files_done.fetch_add(1, Ordering::Relaxed);
        Ok(n)
    }

    async fn download(
        &mut self,
        src: &RemoteUrl,
        dst: &Path,
        size: Option<u64>,
    ) -> Result<u64, ClientError> {
        let timeout = self.opts.timeout;
        let progress = self.stats.bytes.clone();
        let sink = LocalSink::create(dst)?;
        let c = self.connection(src).await?;
        c.set_type(TransferType::Image).await?;
        let addr = c.passive().await?;
        let data = connect_data(addr, timeout).await?;
        let cmd = Command::Retr(src.path.clone());
        c.send(&cmd).await?;
        let r = c.reply().await?;
        if !r.code.is_preliminary() {
            return Err(refused(&cmd, r));
        }
        let file = sink.file.try_clone().map_err(local_err(dst))?;
        let abort = Arc::new(AbortSignal::new());
        abort
            .register(&data)
            .map_err(|e| ClientError::Data(e.to_string()))?;
        let a = abort.clone();
        let copy = tokio::task::spawn_blocking(move || {
            stream::receive_file(&data, &file, 0, false, &progress, &a)
        });
        let got = finish_transfer(c, &cmd, copy, &abort).await?;
        if let Some(expected) = size {
            if got != expected {
                return Err(ClientError::Incomplete {
                    path: src.to_string(),
                    expected,
                    got,
                });
            }
        }
        sink.commit()?;
        Ok(got)
    }

    async fn upload(&mut self, src: &Path, dst: &RemoteUrl) -> Result<u64, ClientError> {
        let timeout = self.opts.timeout;
        let progress = self.stats.bytes.clone();
        let file = File::open(src).map_err(local_err(src))?;
        let md = file.metadata().map_err(local_err(src))?;
        let c = self.connection(dst).await?;
        c.set_type(TransferType::Image).await?;
        // ALLO (RFC 959 §4.1.3) tells the server the size: Ferry servers
        // preallocate and refuse to commit a short upload. Servers that do
        // not need it answer 202; a refusal is harmless. A pipe or device
        // has no size to announce.
        if md.is_file() {
            let _ = c
                .command(&Command::Allo(ferry_proto::command::Allo {
                    size: md.len(),
                    record: None,
                }))
                .await?;
        }
        let addr = c.passive().await?;
        let data = connect_data(addr, timeout).await?;
        let cmd = Command::Stor(dst.path.clone());
        c.send(&cmd).await?;
        let r = c.reply().await?;
        if !r.code.is_preliminary() {
            return Err(refused(&cmd, r));
        }
        let abort = Arc::new(AbortSignal::new());
        abort
            .register(&data)
            .map_err(|e| ClientError::Data(e.to_string()))?;
        let a = abort.clone();
        let copy = tokio::task::spawn_blocking(move || {
            let n = stream::send_file(&file, 0, None, &data, &progress, &a)?;
            stream::finish_send(&data)?;
            Ok(n)
        });
        finish_transfer(c, &cmd, copy, &abort).await
    }

    /// A server-to-server copy (RFC 959 §5.2 "third party"): the destination
    /// listens, the source connects to it; data never passes through here.
    async fn third_party(&mut self, src: &RemoteUrl, dst: &RemoteUrl) -> Result<u64, ClientError> {
        if src.same_endpoint(dst) && src.path == dst.path {
            return Err(ClientError::Usage(format!(
                "{src} and {dst} are the same file"
            )));
        }
        let d = self.connection(dst).await?;
        d.set_type(TransferType::Image).await?;
        let addr = d.passive().await?;
        let stor = Command::Stor(dst.path.clone());
        d.send(&stor).await?;
        let s = self.connection(src).await?;
        s.set_type(TransferType::Image).await?;
        let SocketAddr::V4(v4) = addr else {
            return Err(ClientError::Usage(
                "third-party copies over IPv6 need EPRT; not supported yet".into(),
            ));
        };
        let port = Command::Port(v4);
        let r = s.command(&port).await?;
        let src_result = if r.code.get() != 200 {
            Err(refused(&port, r))
        } else {
            let retr = Command::Retr(src.path.clone());
            s.send(&retr).await?;
            async {
                loop {
                    let r = s.reply_untimed().await?;
                    if r.code.is_preliminary() {
                        continue;
                    }
                    return if r.code.is_positive_completion() {
                        Ok(())
                    } else {
                        Err(refused(&retr, r))
                    };
                }
            }
            .await
        };
        let d = self.connection(dst).await?;
        if let Err(e) = src_result {
            // The destination is waiting for a connection that will not come.
            let _ = d.send(&Command::Abor).await;
            while let Ok(r) = d.reply().await {
                if r.code.get() == 226
                    || r.code.get() == 225
                    || r.code.is_negative() && r.code.get() != 426
                {
                    break;
                }
            }
            return Err(e);
        }
        loop {
            let r = d.reply_untimed().await?;
            if r.code.is_preliminary() {
                continue;
            }
            if !r.code.is_positive_completion() {
                return Err(refused(&stor, r));
            }
            break;
        }
        let size = self
            .connection(dst)
            .await?
            .size(&dst.path)
            .await?
            .unwrap_or(0);
        self.stats.bytes.fetch_add(size, Ordering::Relaxed);
        Ok(size)
    }

    pub async fn make_dir(&mut self, url: &RemoteUrl) -> Result<(), ClientError> {
        let path = url.path.trim_end_matches('/').to_string();
        self.connection(url)
            .await?
            .expect(&Command::Mkd(path))
            .await
            .map(|_| ())
    }

    /// Removes a file, or a directory (with its contents when `recursive`).
    pub async fn remove(&mut self, url: &RemoteUrl, recursive: bool) -> Result<u64, ClientError> {
        let path = url.path.trim_end_matches('/').to_string();
        let facts = self.connection(url).await?.stat(&path).await?;
        match facts {
            None => Err(ClientError::Usage(format!(
                "{url}: no such file or directory on the server"
            ))),
            Some(f) if f.kind == FileKind::Dir => {
                let mut n = 0;
                if recursive {
                    for e in self.read_dir(&Location::Remote(url.clone())).await? {
                        n += Box::pin(
                            self.remove(&url.with_path(remote_join(&path, &e.name)), true),
                        )
                        .await?;
                    }
                } else if !self
                    .read_dir(&Location::Remote(url.clone()))
                    .await?
                    .is_empty()
                {
                    return Err(ClientError::Usage(format!(
                        "{url} is a directory that is not empty; use -r"
                    )));
                }
                self.connection(url)
                    .await?
                    .expect(&Command::Rmd(path))
                    .await?;
                Ok(n + 1)
            }
            Some(_) => {
                self.connection(url)
                    .await?
                    .expect(&Command::Dele(path))
                    .await?;
                Ok(1)
            }
        }
    }
}

/// Waits for the end of a transfer on both channels: the copy thread and
/// the final reply. If the server reports failure first, the copy is
/// stopped rather than left to time out.
async fn finish_transfer(
    c: &mut ControlChannel,
    cmd: &Command,
    mut copy: tokio::task::JoinHandle<Result<u64, CopyError>>,
    abort: &AbortSignal,
) -> Result<u64, ClientError> {
    let map_copy =
        |r: Result<Result<u64, CopyError>, tokio::task::JoinError>| -> Result<u64, ClientError> {
            match r {
                Ok(Ok(n)) => Ok(n),
                Ok(Err(CopyError::Disk(e))) => Err(ClientError::Local {
                    path: "local file".into(),
                    error: e,
                }),
                Ok(Err(e)) => Err(ClientError::Data(e.to_string())),
                Err(e) => Err(ClientError::Data(e.to_string())),
            }
        };
    let (reply, copied) = tokio::select! {
        r = c.reply_untimed() => {
            let r = r?;
            if r.code.is_negative() {
                abort.abort();
            }
            (r, map_copy(copy.await))
        }
        done = &mut copy => {
            let copied = map_copy(done);
            (c.reply().await?, copied)
        }
    };
    if !reply.code.is_positive_completion() {
        return Err(refused(cmd, reply));
    }
    copied
}

async fn connect_data(
    addr: SocketAddr,
    timeout: Duration,
) -> Result<std::net::TcpStream, ClientError> {
    let s = tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| ClientError::Timeout {
            what: format!("opening the data connection to {addr}"),
            secs: timeout.as_secs(),
        })?
        .map_err(|e| ClientError::Data(format!("cannot connect to {addr}: {e}")))?;
    let s = s.into_std()?;
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    Ok(s)
}

/// Reads a directory listing: MLSD where the server has it, LIST otherwise.
pub(crate) async fn list_remote(
    c: &mut ControlChannel,
    path: &str,
    timeout: Duration,
) -> Result<Vec<FileFacts>, ClientError> {
    c.set_type(TransferType::Ascii).await?;
    let addr = c.passive().await?;
    let data = connect_data(addr, timeout).await?;
    let mlsd = c.features.has("MLST");
    let cmd = if mlsd {
        Command::Mlsd(Some(path.to_string()))
    } else {
        Command::List(Some(path.to_string()))
    };
    c.send(&cmd).await?;
    let r = c.reply().await?;
    if !r.code.is_preliminary() {
        return Err(refused(&cmd, r));
    }
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::new();
        // Bound a listing at 256 MiB: a hostile server cannot exhaust memory.
        (&data).take(256 << 20).read_to_end(&mut out)?;
        Ok(out)
    });
    let r = c.reply_untimed().await?;
    if !r.code.is_positive_completion() {
        return Err(refused(&cmd, r));
    }
    let bytes = read
        .await
        .map_err(|e| ClientError::Data(e.to_string()))?
        .map_err(|e| ClientError::Data(e.to_string()))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut out: Vec<FileFacts> = text
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            if mlsd {
                parse_mlsx(l)
            } else {
                parse_list_line(l)
            }
        })
        .filter(|f| f.name != "." && f.name != ".." && !f.name.contains('/'))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// A local destination file: a partial name until committed, unless the
/// destination is a device such as /dev/null.
struct LocalSink {
    file: File,
    partial: Option<PathBuf>,
    target: PathBuf,
}

impl LocalSink {
    fn create(target: &Path) -> Result<Self, ClientError> {
        use std::os::unix::fs::FileTypeExt;
        if let Ok(md) = std::fs::metadata(target) {
            let ft = md.file_type();
            if ft.is_char_device() || ft.is_fifo() {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(target)
                    .map_err(local_err(target))?;
                return Ok(Self {
                    file,
                    partial: None,
                    target: target.to_path_buf(),
                });
            }
            if md.is_dir() {
                return Err(ClientError::local(
                    target.display(),
                    std::io::ErrorKind::IsADirectory.into(),
                ));
            }
        }
        let name = target
            .file_name()
            .ok_or_else(|| ClientError::Usage(format!("{}: not a file name", target.display())))?;
        let partial = target.with_file_name(format!(".{}.ferry-part", name.to_string_lossy()));
        let file = File::create(&partial).map_err(local_err(&partial))?;
        Ok(Self {
            file,
            partial: Some(partial),
            target: target.to_path_buf(),
        })
    }

    fn commit(self) -> Result<(), ClientError> {
        if let Some(partial) = &self.partial {
            std::fs::rename(partial, &self.target).map_err(local_err(&self.target))?;
        }
        Ok(())
    }
}

fn copy_local(src: &Path, dst: &Path, stats: &Stats) -> Result<u64, ClientError> {
    let sink = LocalSink::create(dst)?;
    let mut input = File::open(src).map_err(local_err(src))?;
    let mut out = &sink.file;
    let n = std::io::copy(&mut input, &mut out).map_err(local_err(dst))?;
    stats.bytes.fetch_add(n, Ordering::Relaxed);
    sink.commit()?;
    Ok(n)
}
