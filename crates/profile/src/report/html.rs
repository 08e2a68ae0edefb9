//! `report.html`: one self-contained page (inline CSS and SVG, no scripts,
//! no external resources) so it can be mailed, attached to an issue or
//! opened from a cluster's scratch directory without a web server.

use std::fmt::Write as _;

use super::analysis::{plot_points, Analysis, HostSummary, Stat};
use super::plots::{self, Layer, Series, Span};
use super::{Profile, Side};
use crate::error::Result;
use crate::perf::PerfSummary;
use crate::sampler::HostProfile;
use crate::units::{format_bytes, format_ms, format_rate, format_rate_both, three_digits};
use crate::verdict::Verdict;

const MIB: f64 = 1024.0 * 1024.0;

pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::from("<table><thead><tr>");
    for h in headers {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

pub(crate) fn date(unix_ms: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(unix_ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| unix_ms.to_string())
}

pub(crate) fn peak_avg(s: &Stat, f: impl Fn(f64) -> String) -> String {
    format!("{} / {}", f(s.peak), f(s.avg))
}

pub(crate) fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

/// The rows of the paper's table, one column per side present.
pub(crate) fn summary_rows(a: &Analysis) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let sides: Vec<(Side, &HostSummary)> =
        [Side::Client, Side::Server].into_iter().filter_map(|s| a.host(s).map(|h| (s, h))).collect();
    let mut headers = vec!["peak / average"];
    headers.extend(sides.iter().map(|(s, _)| s.label()));
    let row = |name: &str, f: &dyn Fn(&HostSummary) -> String| {
        let mut r = vec![name.to_string()];
        r.extend(sides.iter().map(|(_, h)| f(h)));
        r
    };
    fn iface(h: &HostSummary) -> Option<&super::analysis::InterfaceSummary> {
        let name = h.busiest_interface.as_ref()?;
        h.interfaces.iter().find(|i| &i.name == name)
    }
    let rows = vec![
        row("host", &|h| h.hostname.clone()),
        row("load average (1 min)", &|h| peak_avg(&h.load_1min, three_digits)),
        row("CPU busy, % of all cores", &|h| peak_avg(&h.cpu_busy_percent, pct)),
        row("  user", &|h| peak_avg(&h.cpu_user_percent, pct)),
        row("  system", &|h| peak_avg(&h.cpu_system_percent, pct)),
        row("  softirq", &|h| peak_avg(&h.cpu_softirq_percent, pct)),
        row("  iowait", &|h| peak_avg(&h.cpu_iowait_percent, pct)),
        row("kernel share of busy CPU", &|h| pct(h.kernel_share_percent)),
        row("kernel share of perf samples", &|h| h.perf_kernel_percent.map(pct).unwrap_or_else(|| "—".into())),
        row("busiest core (busy peak / avg)", &|h| {
            h.busiest_core
                .and_then(|c| h.cores.iter().find(|x| x.core == c))
                .map(|c| format!("cpu{}: {}", c.core, peak_avg(&c.busy, pct)))
                .unwrap_or_else(|| "—".into())
        }),
        row("I/O transfers per second", &|h| peak_avg(&h.io_transfers_per_s, three_digits)),
        row("disk read", &|h| peak_avg(&h.disk_read_bytes_per_s, format_rate)),
        row("disk write", &|h| peak_avg(&h.disk_write_bytes_per_s, format_rate)),
        row("packets received per second", &|h| {
            iface(h)
                .map(|i| format!("{} ({})", peak_avg(&i.rx_packets_per_s, three_digits), i.name))
                .unwrap_or_else(|| "—".into())
        }),
        row("packets transmitted per second", &|h| {
            iface(h)
                .map(|i| format!("{} ({})", peak_avg(&i.tx_packets_per_s, three_digits), i.name))
                .unwrap_or_else(|| "—".into())
        }),
        row("network received", &|h| {
            iface(h).map(|i| peak_avg(&i.rx_bytes_per_s, format_rate)).unwrap_or_else(|| "—".into())
        }),
        row("network transmitted", &|h| {
            iface(h).map(|i| peak_avg(&i.tx_bytes_per_s, format_rate)).unwrap_or_else(|| "—".into())
        }),
        row("TCP retransmitted segments per second", &|h| peak_avg(&h.tcp_retrans_segs_per_s, three_digits)),
        row("TCP retransmitted share of segments", &|h| format!("{:.3}%", h.retrans_percent)),
        row("context switches per second", &|h| peak_avg(&h.context_switches_per_s, three_digits)),
        row("memory available (lowest)", &|h| format_bytes(h.memory_available_min_bytes)),
        row("dirty / writeback (peak)", &|h| {
            format!("{} / {}", format_bytes(h.dirty_peak_bytes), format_bytes(h.writeback_peak_bytes))
        }),
        row("watched process CPU (% of one core)", &|h| {
            h.process_cpu_percent.map(|s| peak_avg(&s, pct)).unwrap_or_else(|| "—".into())
        }),
        row("watched process RSS (peak)", &|h| {
            h.process_rss_peak_bytes.map(format_bytes).unwrap_or_else(|| "—".into())
        }),
    ];
    (headers, rows)
}

pub(crate) fn stream_rows(a: &Analysis) -> Vec<Vec<String>> {
    a.streams
        .iter()
        .map(|s| {
            vec![
                s.side.map(|x| x.label()).unwrap_or("").to_string(),
                if s.label.is_empty() { format!("#{}", s.id) } else { s.label.clone() },
                if s.sender { "send".into() } else { "receive".into() },
                format!("{} / {}", format_ms(s.rtt_ms.avg), format_ms(s.min_rtt_ms)),
                if s.sender { format!("{:.0} / {:.0}", s.cwnd.peak, s.cwnd.avg) } else { "—".into() },
                s.total_retrans.to_string(),
                format_rate(s.throughput_bytes_per_s),
                // The limits are the sender's; the receiving end of a stream
                // only reports on its own, idle, send direction.
                if s.sender {
                    format!(
                        "{:.0}% / {:.0}% / {:.0}%",
                        s.rwnd_limited_percent, s.sndbuf_limited_percent, s.app_limited_percent
                    )
                } else {
                    "—".into()
                },
                if s.sender { s.limited_by.clone() } else { "(see the sender)".into() },
            ]
        })
        .collect()
}

/// The verdict, its figures, the runner-up and the advice.
fn verdict_html(h: &mut String, v: &Verdict) {
    if v.conclusive {
        let _ = write!(
            h,
            "<p class=\"verdict-line\"><b>Verdict: {}</b> (score {:.2}).</p><ul class=\"evidence\">",
            esc(&v.name),
            v.score
        );
        for e in &v.evidence {
            let _ = write!(h, "<li>{}</li>", esc(e));
        }
        h.push_str("</ul>");
        if let Some(l) = v.limit {
            let _ = write!(h, "<p><b>What to try:</b> {}.</p>", esc(l.advice()));
        }
    } else {
        let _ = write!(
            h,
            "<p class=\"verdict-line\"><b>Verdict: inconclusive</b>: {}.</p>",
            esc(v.why_inconclusive.as_deref().unwrap_or(""))
        );
        if let Some(b) = v.candidates.first() {
            let _ = write!(h, "<p>Best candidate: {} (score {:.2}).</p>", esc(&b.name), b.score);
        }
    }
    if let Some(r) = &v.runner_up {
        let _ = write!(h, "<p><b>Runner-up:</b> {}.</p>", esc(r));
    }
}

pub(crate) fn candidate_rows(v: &Verdict) -> Vec<Vec<String>> {
    v.candidates
        .iter()
        .map(|c| vec![c.name.clone(), format!("{:.2}", c.score), c.evidence.join("; "), c.against.join("; ")])
        .collect()
}

/// "ftp://host/x -> /tmp/x" is too long for a chart's corner.
fn short_label(label: &str) -> String {
    if label.chars().count() <= 24 {
        label.to_string()
    } else {
        "profiled transfer".to_string()
    }
}

pub(crate) const STREAM_HEADERS: [&str; 9] = [
    "side",
    "stream",
    "role",
    "RTT avg / min",
    "cwnd peak / avg (segments)",
    "retransmits",
    "throughput",
    "rwnd / sndbuf / app limited",
    "limited by",
];

/// Rows of a table, each a list of cells.
pub(crate) type Rows = Vec<Vec<String>>;

/// The module, shared-object and symbol tables of a perf summary.
pub(crate) fn perf_tables(p: &PerfSummary) -> (Rows, Rows, Rows) {
    let groups = p
        .groups
        .iter()
        .map(|g| vec![g.name.clone(), format!("{:.1}%", g.percent), g.samples.to_string(), g.examples.join(", ")])
        .collect();
    let dsos = p
        .dsos
        .iter()
        .take(12)
        .map(|d| {
            let name =
                if d.dso == "[kernel.kallsyms]" { "kernel ([kernel.kallsyms])".to_string() } else { d.dso.clone() };
            vec![name, format!("{:.1}%", d.percent), d.samples.to_string()]
        })
        .collect();
    let syms = p
        .symbols
        .iter()
        .map(|s| {
            vec![
                s.symbol.clone(),
                s.dso.clone(),
                s.group.label().to_string(),
                format!("{:.2}%", s.percent),
                s.samples.to_string(),
            ]
        })
        .collect();
    (groups, dsos, syms)
}

fn offset_s(profile: &Profile, start_unix_ms: u64) -> f64 {
    start_unix_ms.saturating_sub(profile.origin_unix_ms()) as f64 / 1000.0
}

fn x_max(profile: &Profile) -> f64 {
    let mut m: f64 = 0.0;
    for side in [Side::Client, Side::Server] {
        if let Some(h) = profile.host(side) {
            let off = offset_s(profile, h.start_unix_ms);
            m = m.max(off + h.samples.last().map(|s| s.t).unwrap_or(0.0));
        }
    }
    for t in &profile.transfers {
        m = m.max(offset_s(profile, t.start_unix_ms) + t.samples.last().map(|s| s.t).unwrap_or(0.0));
    }
    m
}

fn sides(profile: &Profile) -> Vec<(Side, &HostProfile)> {
    [Side::Client, Side::Server].into_iter().filter_map(|s| profile.host(s).map(|h| (s, h))).collect()
}

/// A legend name that tells streams apart even when the data path gave
/// them all the same label: side, label, and the local → peer ports.
fn stream_name(side: Side, s: &crate::streams::StreamSeries) -> String {
    let port = |a: &Option<String>| a.as_deref().and_then(|a| a.rsplit(':').next()).unwrap_or("?").to_string();
    format!("{} {} :{}→:{}", side.label(), s.label, port(&s.local), port(&s.peer))
}

fn plots(profile: &Profile, a: &Analysis) -> Result<Vec<String>> {
    let xm = x_max(profile);
    let mut out = Vec::new();
    // Each transfer and variant shaded on every chart, so a reader sees
    // which run a stretch of CPU or packets belongs to.
    let spans: Vec<Span> = profile
        .transfers
        .iter()
        .filter_map(|t| {
            let off = offset_s(profile, t.start_unix_ms);
            let (first, last) = (t.samples.first()?, t.samples.last()?);
            Some(Span { name: short_label(&t.label), from: off + first.t, to: off + last.t })
        })
        .collect();

    // Throughput: the transfer's own progress when given, else what the
    // busiest interface carried.
    let mut tp: Vec<Series> = profile
        .transfers
        .iter()
        .map(|t| {
            let off = offset_s(profile, t.start_unix_ms);
            Series {
                name: t.label.clone(),
                points: plot_points(t).into_iter().map(|(x, r)| (x + off, r / MIB)).collect(),
            }
        })
        .collect();
    if tp.is_empty() {
        for (side, h) in sides(profile) {
            let Some(name) = a.host(side).and_then(|s| s.busiest_interface.clone()) else { continue };
            let off = offset_s(profile, h.start_unix_ms);
            let pts = h
                .samples
                .iter()
                .map(|s| {
                    let n = s.nets.iter().find(|n| n.name == name);
                    (s.t + off, n.map(|n| n.rx_bytes_per_s.max(n.tx_bytes_per_s)).unwrap_or(0.0) / MIB)
                })
                .collect();
            tp.push(Series { name: format!("{} {name}", side.label()), points: pts });
        }
    }
    out.push(plots::line_chart("throughput", "Throughput", "MiB/s", &tp, &spans, xm)?);

    for (side, h) in sides(profile) {
        let off = offset_s(profile, h.start_unix_ms);
        let pts = |f: &dyn Fn(&crate::sampler::CpuShare) -> f64| {
            h.samples.iter().map(|s| (s.t + off, f(&s.cpu))).collect::<Vec<_>>()
        };
        let layers = [
            Layer { name: "user", color: plotters::style::RGBColor(31, 119, 180), points: pts(&|c| c.user + c.nice) },
            Layer { name: "system", color: plotters::style::RGBColor(214, 39, 40), points: pts(&|c| c.system) },
            Layer { name: "softirq", color: plotters::style::RGBColor(255, 127, 14), points: pts(&|c| c.softirq) },
            Layer { name: "irq", color: plotters::style::RGBColor(148, 103, 189), points: pts(&|c| c.irq) },
            Layer { name: "iowait", color: plotters::style::RGBColor(140, 140, 140), points: pts(&|c| c.iowait) },
        ];
        // The Ferry process's own share, on top of the machine's bands: on a
        // shared machine the bands are mostly someone else's.
        let cores = h.host.cores.max(1) as f64;
        let own = |f: &dyn Fn(&crate::sampler::ProcessSample) -> f64| {
            h.samples
                .iter()
                .filter_map(|s| s.process.map(|p| (s.t + off, (f(&p) / cores).min(100.0))))
                .collect::<Vec<_>>()
        };
        let mut lines =
            vec![Series { name: "Ferry process".into(), points: own(&|p| p.user_percent + p.system_percent) }];
        lines.push(Series {
            name: "Ferry, + waiting for a CPU".into(),
            points: own(&|p| p.user_percent + p.system_percent + p.run_delay_percent),
        });
        lines.retain(|l| !l.points.is_empty());
        let title = format!("CPU, {} ({} cores)", side.label(), h.host.cores);
        out.push(plots::stacked_chart("cpu", &title, "% of all cores", &layers, &lines, &spans, xm, 100.0)?);
    }

    let mut pk = Vec::new();
    let mut disk = Vec::new();
    for (side, h) in sides(profile) {
        let off = offset_s(profile, h.start_unix_ms);
        let names: Vec<String> =
            a.host(side).map(|s| s.interfaces.iter().take(4).map(|i| i.name.clone()).collect()).unwrap_or_default();
        for name in names {
            for (dir, rx) in [("rx", true), ("tx", false)] {
                let points = h
                    .samples
                    .iter()
                    .map(|s| {
                        let n = s.nets.iter().find(|n| n.name == name);
                        (s.t + off, n.map(|n| if rx { n.rx_packets_per_s } else { n.tx_packets_per_s }).unwrap_or(0.0))
                    })
                    .collect();
                pk.push(Series { name: format!("{} {name} {dir}", side.label()), points });
            }
        }
        for (dir, read) in [("read", true), ("write", false)] {
            let points = h
                .samples
                .iter()
                .map(|s| {
                    (s.t + off, if read { s.disk_total.read_bytes_per_s } else { s.disk_total.write_bytes_per_s } / MIB)
                })
                .collect();
            disk.push(Series { name: format!("{} disk {dir}", side.label()), points });
        }
    }
    out.push(plots::line_chart("packets", "Packets per second", "packets/s", &pk, &spans, xm)?);
    out.push(plots::line_chart("disk", "Disk throughput", "MiB/s", &disk, &spans, xm)?);

    let mut rtt = Vec::new();
    let mut cwnd = Vec::new();
    for (side, h) in sides(profile) {
        let off = offset_s(profile, h.start_unix_ms);
        for s in &h.streams {
            let name = stream_name(side, s);
            rtt.push(Series {
                name: name.clone(),
                points: s.samples.iter().map(|x| (x.t + off, x.info.rtt_us as f64 / 1000.0)).collect(),
            });
            let sender = s.samples.last().is_some_and(|l| l.info.bytes_acked >= l.info.bytes_received);
            if sender {
                cwnd.push(Series {
                    name,
                    points: s.samples.iter().map(|x| (x.t + off, x.info.snd_cwnd as f64)).collect(),
                });
            }
        }
    }
    out.push(plots::line_chart("rtt", "Per-stream RTT (TCP_INFO)", "ms", &rtt, &spans, xm)?);
    out.push(plots::line_chart("cwnd", "Per-stream congestion window, sending side", "segments", &cwnd, &spans, xm)?);
    Ok(out)
}

const CSS: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto; max-width: 1000px; color: #222; padding: 0 12px; }
h1 { font-size: 24px; margin-bottom: 4px; }
h2 { font-size: 19px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 16px; margin-top: 20px; }
.sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f4f6f8; }
td:not(:first-child) { font-variant-numeric: tabular-nums; }
.verdict { background: #fff8e1; border-left: 4px solid #f0b400; padding: 10px 14px; margin: 12px 0; }
.verdict p { margin: 4px 0; }
.verdict-line { font-size: 17px; }
ul.evidence li { margin: 2px 0; }
li.not_the_limit { color: #666; }
ul.hints li { margin: 4px 0; }
figure { margin: 8px 0 20px; }
svg { max-width: 100%; height: auto; }
.note { color: #666; font-size: 13px; }
code { background: #f4f4f4; padding: 1px 4px; border-radius: 3px; }
"#;

pub(crate) fn render(profile: &Profile, a: &Analysis) -> Result<String> {
    let mut h = String::with_capacity(256 * 1024);
    let m = &profile.meta;
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Ferry profile — {}</title><style>{CSS}</style></head><body>",
        esc(&m.command)
    );
    let _ = write!(
        h,
        "<h1>Ferry profile</h1><p class=\"sub\"><code>{}</code> — {} — {}</p>",
        esc(&m.command),
        esc(&date(m.created_unix_ms)),
        esc(&m.tool)
    );

    // The verdict first: it is what the reader came for.
    h.push_str("<div class=\"verdict\">");
    for (i, t) in a.transfers.iter().enumerate() {
        let _ = write!(
            h,
            "<p><b>{}</b>: {} in {:.2} s, average {}, peak {}{}.</p>",
            esc(&t.label),
            esc(&format_bytes(t.bytes)),
            t.duration_s,
            esc(&format_rate_both(t.avg_bytes_per_s)),
            esc(&format_rate(t.peak_bytes_per_s)),
            if i > 0 && !t.limit.is_empty() {
                format!("; in its own window: {}", esc(&t.limit))
            } else {
                String::new()
            }
        );
    }
    match &a.verdict {
        Some(v) => verdict_html(&mut h, v),
        None => {
            h.push_str("<p><b>Verdict: inconclusive</b>: no transfer was recorded, so there is no window to judge.</p>")
        }
    }
    if let Some(b) = &a.comparison {
        let _ = write!(h, "<p><b>Variants:</b> {}</p>", esc(&b.statement));
    }
    if !a.hints.is_empty() {
        h.push_str("<ul class=\"hints\">");
        for hint in &a.hints {
            let _ = write!(h, "<li class=\"{}\">{}</li>", esc(&hint.relation), esc(&hint.message));
        }
        h.push_str("</ul>");
    }
    h.push_str("</div>");

    if let Some(v) = &a.verdict {
        h.push_str("<h2>Evidence for each candidate limit</h2>");
        h.push_str("<p class=\"note\">Each candidate is scored from 0 (no evidence) to 1 from the samples of the profiled transfer's own time window. The verdict names the best if it scores at least 0.5 and leads the runner-up by 0.1; otherwise it is inconclusive. docs/profiler.md explains every rule.</p>");
        h.push_str(&table(&["candidate", "score", "for", "against"], &candidate_rows(v)));
    }

    if let Some(c) = &profile.comparison {
        h.push_str("<h2>Memory and disk variants</h2>");
        let base = c.memory_to_memory.unwrap_or(0.0);
        let limit_of =
            |label: &str| a.transfers.iter().find(|t| t.label == label).map(|t| t.limit.clone()).unwrap_or_default();
        let rows: Vec<Vec<String>> = [
            ("memory to memory", c.memory_to_memory),
            ("disk to memory", c.disk_to_memory),
            ("memory to disk", c.memory_to_disk),
            ("disk to disk", c.disk_to_disk),
        ]
        .into_iter()
        .filter_map(|(n, v)| v.map(|v| (n, v)))
        .map(|(n, v)| {
            vec![
                n.to_string(),
                format_rate_both(v),
                if base > 0.0 { format!("{:.0}%", 100.0 * v / base) } else { "—".into() },
                if n == "disk to disk" {
                    a.verdict.as_ref().map(|v| v.name.clone()).unwrap_or_default()
                } else {
                    limit_of(n)
                },
            ]
        })
        .collect();
        h.push_str(&table(&["variant", "throughput", "of memory to memory", "verdict in its window"], &rows));
    }

    h.push_str("<h2>Over time</h2>");
    for svg in plots(profile, a)? {
        let _ = write!(h, "<figure>{svg}</figure>");
    }

    h.push_str("<h2>Summary (peak / average)</h2>");
    let (headers, rows) = summary_rows(a);
    h.push_str(&table(&headers, &rows));
    if !a.table_notes.is_empty() {
        h.push_str("<h3>How these tables bear on the verdict</h3><ul class=\"note\">");
        for n in &a.table_notes {
            let _ = write!(h, "<li><b>{}</b>: {}</li>", esc(&n.table), esc(&n.note));
        }
        h.push_str("</ul>");
    }

    for (side, _) in sides(profile) {
        let Some(s) = a.host(side) else { continue };
        let _ = write!(h, "<h3>Cores, {}</h3>", side.label());
        let rows: Vec<Vec<String>> = s
            .cores
            .iter()
            .map(|c| {
                vec![
                    format!("cpu{}", c.core),
                    peak_avg(&c.busy, pct),
                    pct(c.user_avg),
                    pct(c.system_avg),
                    pct(c.softirq_avg),
                    pct(c.irq_avg),
                    pct(c.iowait_avg),
                ]
            })
            .collect();
        h.push_str(&table(&["core", "busy peak / avg", "user", "system", "softirq", "irq", "iowait"], &rows));
        if !s.interfaces.is_empty() {
            let rows: Vec<Vec<String>> = s
                .interfaces
                .iter()
                .map(|i| {
                    vec![
                        i.name.clone(),
                        peak_avg(&i.rx_packets_per_s, three_digits),
                        peak_avg(&i.tx_packets_per_s, three_digits),
                        peak_avg(&i.rx_bytes_per_s, format_rate),
                        peak_avg(&i.tx_bytes_per_s, format_rate),
                    ]
                })
                .collect();
            let _ = write!(h, "<h3>Network interfaces, {}</h3>", side.label());
            h.push_str(&table(&["interface", "rx packets/s", "tx packets/s", "rx", "tx"], &rows));
        }
    }

    if !a.streams.is_empty() {
        h.push_str("<h2>Data streams (TCP_INFO)</h2>");
        h.push_str(&table(&STREAM_HEADERS, &stream_rows(a)));
        h.push_str("<p class=\"note\">A stream's limit is read from the kernel's own accounting on the sending side: the share of its busy time spent waiting for the receiver's window (rwnd) or its own send buffer (sndbuf), and the share of samples in which it had nothing to send (app). When none dominates, TCP's congestion window set the pace.</p>");
    }

    for (side, host) in sides(profile) {
        match (&host.perf, &host.perf_error) {
            (Some(p), _) => {
                let _ = write!(
                    h,
                    "<h2>CPU profile, {} (perf, {}, {} samples of {} over {:.1} s)</h2>",
                    side.label(),
                    esc(&p.target),
                    p.samples,
                    esc(&p.event),
                    p.duration_s
                );
                let (groups, dsos, syms) = perf_tables(p);
                h.push_str("<h3>By module</h3>");
                h.push_str(&table(&["module", "share", "samples", "heaviest symbols"], &groups));
                h.push_str("<h3>By shared object</h3>");
                h.push_str(&table(&["shared object", "share", "samples"], &dsos));
                h.push_str("<h3>Top symbols (self time)</h3>");
                h.push_str(&table(&["symbol", "shared object", "module", "share", "samples"], &syms));
            }
            (None, Some(e)) => {
                let _ = write!(h, "<h2>CPU profile, {}</h2><p>No perf profile: {}</p>", side.label(), esc(e));
            }
            (None, None) => {}
        }
    }

    if let Some(t) = &profile.tuning {
        h.push_str("<h2>Tuning sweep</h2>");
        let _ = write!(h, "<p>{}</p>", esc(&t.recommendation()));
        let rows: Vec<Vec<String>> = t
            .trials
            .iter()
            .map(|tr| {
                vec![
                    tr.index.to_string(),
                    tr.knob.map(|k| k.label().to_string()).unwrap_or_else(|| "start".into()),
                    tr.config.to_string(),
                    format_rate_both(tr.rate),
                    match (&tr.error, tr.accepted) {
                        (Some(e), _) => format!("failed: {e}"),
                        (None, true) => "kept".into(),
                        (None, false) => "not kept".into(),
                    },
                ]
            })
            .collect();
        h.push_str(&table(&["#", "knob", "configuration", "throughput", "verdict"], &rows));
    }

    h.push_str("<h2>Run</h2>");
    let st = &m.settings;
    let mut run_rows: Vec<Vec<String>> =
        vec![vec!["command".into(), m.command.clone()], vec!["created".into(), date(m.created_unix_ms)]];
    let opt = |n: &str, v: Option<String>| v.map(|v| vec![n.to_string(), v]);
    run_rows.extend(
        [
            opt("source", st.source.clone()),
            opt("destination", st.destination.clone()),
            opt("reading side", st.reader.map(|r| r.label().to_string())),
            opt("mode", st.mode.clone()),
            opt("transport", st.transport.clone()),
            opt("parallel streams", st.parallel_streams.map(|v| v.to_string())),
            opt("TCP buffer", st.tcp_buffer_bytes.map(format_bytes)),
            opt("block size", st.block_size_bytes.map(format_bytes)),
            opt("staging", st.staging_bytes.map(format_bytes)),
            opt("files", st.files.map(|v| v.to_string())),
            opt("bytes", st.bytes.map(format_bytes)),
        ]
        .into_iter()
        .flatten(),
    );
    run_rows.extend(st.extra.iter().map(|(k, v)| vec![k.clone(), v.clone()]));
    h.push_str(&table(&["", ""], &run_rows));

    let host_rows: Vec<Vec<String>> = sides(profile)
        .iter()
        .map(|(side, x)| {
            vec![
                side.label().to_string(),
                x.host.hostname.clone(),
                format!("{} ({})", x.host.kernel, x.host.os),
                format!("{} × {}", x.host.cores, x.host.cpu_model),
                format_bytes(x.host.mem_total_bytes),
                format!(
                    "{} samples every {} ms over {:.1} s{}",
                    x.samples.len(),
                    x.interval_ms,
                    x.duration_s,
                    if x.truncated { " (truncated)" } else { "" }
                ),
                format!("{:.0} µs mean, {:.0} µs max per sample", x.overhead.mean_us, x.overhead.max_us),
            ]
        })
        .collect();
    h.push_str(&table(&["side", "host", "kernel", "CPU", "memory", "sampling", "sampler cost"], &host_rows));
    for (side, x) in sides(profile) {
        for w in &x.warnings {
            let _ = write!(h, "<p class=\"note\">{}: {}</p>", side.label(), esc(w));
        }
    }

    h.push_str(
        "<h2>How to read this report</h2><ul class=\"note\">\
<li><b>Throughput</b> is the transfer's own progress; dips that line up with a CPU band at 100% or with iowait point at the CPU or the disk.</li>\
<li><b>CPU</b> bands are shares of all cores together: on a 2-core machine one saturated core is 50%. The per-core table shows the saturated core itself; <i>softirq</i> is where the kernel receives packets, <i>system</i> where it copies data and runs the send path.</li>\
<li><b>Kernel share</b> is kernel time divided by busy time; the FTPProfiler paper found data movers spend most of their CPU in the kernel, which zero-copy paths reduce.</li>\
<li><b>I/O transfers per second</b> counts completed disk reads and writes (iostat's tps); <b>packets per second</b> is per interface, loopback included.</li>\
<li><b>RTT</b> rising during a transfer means queues are filling; a <b>cwnd</b> that stops growing while RTT is flat means a window or buffer limit (see the streams table).</li>\
<li>Every sample is in <code>report.json</code>; its fields are described in Ferry's <code>docs/profiler.md</code>.</li></ul>",
    );
    h.push_str("</body></html>\n");
    Ok(h)
}
