//! The README as a new user meets it (issue 13, items 10 and 12): short,
//! links that stay inside the repository, URLs that carry the port, and
//! the examples that measure the path work as written.

mod support;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn readme() -> String {
    std::fs::read_to_string(repo().join("README.md")).unwrap()
}

/// The lines inside ``` blocks.
fn code_lines(text: &str) -> Vec<String> {
    let mut inside = false;
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with("```") {
            inside = !inside;
        } else if inside {
            out.push(l.to_string());
        }
    }
    out
}

#[test]
fn the_readme_is_short_and_links_only_inside_the_repository() {
    let text = readme();
    let lines = text.lines().count();
    assert!(lines < 300, "README.md has {lines} lines; keep it under 300 (details go to docs/)");
    let mut rest = text.as_str();
    let mut links = 0;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let target = &rest[..rest.find(')').unwrap()];
        if target.starts_with("http") || target.starts_with('#') {
            continue;
        }
        links += 1;
        let file = target.split('#').next().unwrap();
        assert!(!file.starts_with("..") && !file.starts_with('/'), "README links outside the repository: {target}");
        assert!(repo().join(file).exists(), "README links to {target}, which does not exist");
    }
    assert!(links >= 10, "the README should say where to read more");
    // The moved material is where the README says.
    for (file, must) in [
        ("docs/profiler.md", "### report.json"),
        ("docs/architecture.md", "## Crates Ferry depends on, and why"),
        ("docs/architecture.md", "## Layers"),
        ("docs/operating.md", "passive"),
    ] {
        let t = std::fs::read_to_string(repo().join(file)).unwrap();
        assert!(t.contains(must), "{file} lacks {must:?}");
    }
}

#[test]
fn every_url_in_the_readme_names_its_port() {
    for line in code_lines(&readme()) {
        for (i, _) in line.match_indices("ftp://").chain(line.match_indices("ftps://")) {
            let url = &line[i..];
            let url = &url[..url.find(char::is_whitespace).unwrap_or(url.len())];
            let authority = url.split("://").nth(1).unwrap().split('/').next().unwrap();
            let host_port = authority.rsplit('@').next().unwrap();
            assert!(
                host_port.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()),
                "{url}: ftp:// without a port means 21, and `ferry serve` listens on 2811"
            );
        }
    }
}

#[test]
fn the_readme_probe_and_tune_examples_work_as_written() {
    let server = FerryServer::start_with(&["--memory-paths"]);
    let home = tempfile::tempdir().unwrap();
    let examples: Vec<String> = code_lines(&readme())
        .into_iter()
        .filter(|l| l.starts_with("ferry probe ") || l.starts_with("ferry tune ") || l.starts_with("ferry ls "))
        .map(|l| l.split(" #").next().unwrap().trim().to_string())
        .collect();
    assert!(
        examples.iter().any(|e| e.starts_with("ferry probe")) && examples.iter().any(|e| e.starts_with("ferry tune"))
    );
    for example in examples {
        let line = example.replace("data.example.org:2811", &server.addr.to_string());
        let mut args: Vec<&str> = line.split_whitespace().skip(1).collect();
        // The same command with a small budget, so the suite stays quick.
        match args[0] {
            "probe" => args.extend(["--bytes", "4M"]),
            "tune" => args.extend([
                "--bytes",
                "2M",
                "--streams",
                "1,2",
                "--tcp-bs",
                "auto",
                "--max-trials",
                "3",
                "--repeats",
                "1",
                "--pause",
                "0",
            ]),
            _ => {}
        }
        if args[0] == "ls" {
            std::fs::create_dir_all(server.path("incoming")).unwrap();
        }
        let mut cmd = Command::new(ferry_bin());
        cmd.env("FERRY_PASSWORD", ALICE.1)
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path())
            .env("FERRY_STATE_DIR", home.path().join("state"));
        let (ok, out, err) = ferry_with(&args, &mut cmd);
        assert!(ok, "`{example}` failed:\n{out}{err}");
    }
}
