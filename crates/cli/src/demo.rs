//! `ferry demo`: the whole job on an embedded default, for a first run.
//!
//! Starts a server on a fresh temporary directory (loopback, a free port, a
//! demo user with write access), generates a file of random data, uploads
//! it, downloads it again, compares checksums, and says what it did.

use anyhow::{bail, Context};
use clap::Args;
use ferry_server::config::AnonymousSetting;
use ferry_server::users::{AccessSetting, UserDb};
use ferry_server::{Server, ServerConfig};
use rand::RngCore;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Size of the generated file in MiB.
    #[arg(long, default_value_t = 64)]
    size_mib: u64,
}

fn digest(path: &std::path::Path) -> anyhow::Result<String> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut h)?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let work = tempfile::tempdir().context("creating a temporary directory")?;
    let served = work.path().join("served");
    let local = work.path().join("local");
    std::fs::create_dir_all(&served)?;
    std::fs::create_dir_all(&local)?;
    let users = work.path().join("users.toml");
    let mut db = UserDb::empty();
    let password = format!("demo-{}", rand::random::<u32>());
    db.set("demo", &password, "/", AccessSetting::Write)?;
    db.save(&users)?;

    let src = local.join("sample.bin");
    {
        let mut f = std::fs::File::create(&src)?;
        let mut buf = vec![0u8; 1 << 20];
        for _ in 0..args.size_mib {
            rand::thread_rng().fill_bytes(&mut buf);
            f.write_all(&buf)?;
        }
    }
    let back = local.join("sample.back.bin");

    let rt = crate::copy::runtime()?;
    rt.block_on(async {
        let config = ServerConfig {
            root: served.clone(),
            listen: "127.0.0.1:0".parse()?,
            users: Some(users.clone()),
            anonymous: AnonymousSetting::Off,
            ..ServerConfig::default()
        };
        let server = Server::bind(config).await?;
        let addr = server.local_addr()?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(server.run(async {
            let _ = stop_rx.await;
        }));
        println!("ferry demo: serving {} on ftp://{addr}/ (user demo)", served.display());
        let url = format!("ftp://demo:{password}@{addr}/sample.bin");
        let shown = format!("ftp://demo@{addr}/sample.bin");

        let opts = ferry_client::CopyOptions { verify: Some("auto".into()), ..Default::default() };
        let copy = |a: &str, b: &str, opts: ferry_client::CopyOptions| {
            let (a, b) = (ferry_client::Location::parse(a), ferry_client::Location::parse(b));
            async move {
                let mut client = ferry_client::Client::new(opts);
                let r = client.copy(&a?, &b?).await;
                client.close().await;
                anyhow::Ok(r?)
            }
        };
        let up = copy(src.to_str().unwrap_or_default(), &url, opts.clone()).await?;
        println!("ferry demo: uploaded   {} -> {shown}: {} bytes", src.display(), up.bytes);
        let down = copy(&url, back.to_str().unwrap_or_default(), opts).await?;
        println!("ferry demo: downloaded {shown} -> {}: {} bytes", back.display(), down.bytes);
        let _ = stop_tx.send(());
        let _ = handle.await;
        anyhow::Ok(())
    })?;
    let (a, b, c) = (digest(&src)?, digest(&served.join("sample.bin"))?, digest(&back)?);
    if a != b || a != c {
        bail!("checksums differ: local {a}, served {b}, downloaded {c}");
    }
    println!("ferry demo: all three copies are identical (SHA-256 {a}); temporary files removed");
    Ok(ExitCode::SUCCESS)
}
