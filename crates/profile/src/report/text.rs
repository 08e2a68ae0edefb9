//! The terminal summary: the same tables as the HTML page, in plain text,
//! for the end of `ferry profile` and for logs.

use std::fmt::Write as _;

use super::analysis::Analysis;
use super::html::{perf_tables, stream_rows, summary_rows, STREAM_HEADERS};
use super::{text_table, Profile, Side};
use crate::units::{format_bytes, format_rate, format_rate_both};

fn with_header(headers: &[&str], rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    let mut all = vec![headers.iter().map(|h| h.to_string()).collect()];
    all.extend(rows);
    all
}

pub(crate) fn render(profile: &Profile, a: &Analysis) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Ferry profile: {}", profile.meta.command);
    for (i, t) in a.transfers.iter().enumerate() {
        let _ = writeln!(
            out,
            "{}: {} in {:.2} s, average {}, peak {}{}",
            t.label,
            format_bytes(t.bytes),
            t.duration_s,
            format_rate_both(t.avg_bytes_per_s),
            format_rate(t.peak_bytes_per_s),
            if i > 0 && !t.limit.is_empty() { format!("; in its own window: {}", t.limit) } else { String::new() }
        );
    }
    if let Some(v) = &a.verdict {
        let _ = writeln!(out, "Verdict: {}", v.statement);
    }
    out.push('\n');

    if a.client.is_some() || a.server.is_some() {
        let (headers, rows) = summary_rows(a);
        out.push_str(&text_table(&with_header(&headers, rows)));
        out.push('\n');
    }

    if !a.streams.is_empty() {
        out.push_str("Data streams (TCP_INFO):\n");
        out.push_str(&text_table(&with_header(&STREAM_HEADERS, stream_rows(a))));
        out.push('\n');
    }

    for side in [Side::Client, Side::Server] {
        let Some(h) = profile.host(side) else { continue };
        if let Some(p) = &h.perf {
            let _ = writeln!(
                out,
                "CPU profile, {} (perf, {}, {} samples, {:.1}% in the kernel):",
                side.label(),
                p.target,
                p.samples,
                p.kernel_percent
            );
            let (groups, dsos, _) = perf_tables(p);
            out.push_str(&text_table(&with_header(&["module", "share", "samples", "heaviest symbols"], groups)));
            out.push('\n');
            out.push_str(&text_table(&with_header(&["shared object", "share", "samples"], dsos)));
            out.push('\n');
        } else if let Some(e) = &h.perf_error {
            let _ = writeln!(out, "No perf profile on the {}: {e}\n", side.label());
        }
    }

    if let Some(t) = &profile.tuning {
        out.push_str("Tuning sweep:\n");
        out.push_str(&t.evidence_table());
        let _ = writeln!(out, "{}\n", t.recommendation());
    }

    if let Some(b) = &a.comparison {
        let _ = writeln!(out, "Variants: {}", b.statement);
    }
    for n in &a.table_notes {
        let _ = writeln!(out, "{}: {}", n.table, n.note);
    }
    if let Some(v) = &a.verdict {
        out.push_str("\nCandidates (score 0-1; evidence for / against):\n");
        for c in &v.candidates {
            let _ = writeln!(out, "  {:.2}  {}", c.score, c.name);
            if c.score >= 0.2 {
                for e in &c.evidence {
                    let _ = writeln!(out, "          + {e}");
                }
                for e in &c.against {
                    let _ = writeln!(out, "          - {e}");
                }
            }
        }
        out.push('\n');
        if v.conclusive {
            let _ = writeln!(out, "Verdict: {} (score {:.2})", v.name, v.score);
            for e in &v.evidence {
                let _ = writeln!(out, "  - {e}");
            }
            if let Some(l) = v.limit {
                let _ = writeln!(out, "What to try: {}.", l.advice());
            }
        } else {
            let _ = writeln!(out, "Verdict: inconclusive: {}.", v.why_inconclusive.as_deref().unwrap_or(""));
        }
        if let Some(r) = &v.runner_up {
            let _ = writeln!(out, "Runner-up: {r}.");
        }
    }
    if !a.hints.is_empty() {
        out.push_str("Hints:\n");
        for h in &a.hints {
            let _ = writeln!(out, "  - {}", h.message);
        }
    }
    out
}
