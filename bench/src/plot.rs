//! SVG plots: grouped bars, and throughput against one-way delay (the
//! papers' figure). Medians are drawn, with a whisker over the min–max
//! range of the repetitions.
//!
//! The legend is drawn in a column of its own beside the chart rather than
//! inside it, because with seven or eight rows per group any corner of the
//! plotting area may hold a bar.

use std::path::Path;

use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{BenchError, Result};
use crate::record::Role;
use crate::stats::Summary;

/// One row of a legend: a tool with its flags, and its value per category.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub role: Role,
    /// (category index, value)
    pub points: Vec<(usize, Summary)>,
}

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 560;
const LEGEND_WIDTH: u32 = 330;

/// Colour of the `i`-th series of a role: blues for Ferry, oranges and reds
/// for Globus, greens for iperf3, greys for the disk, purples for crosses.
fn colour(role: Role, i: usize) -> RGBColor {
    let shades: &[RGBColor] = match role {
        Role::Ferry => &[RGBColor(31, 87, 180), RGBColor(70, 140, 230), RGBColor(15, 50, 110), RGBColor(120, 180, 250)],
        Role::FerryOld => &[RGBColor(140, 170, 200), RGBColor(100, 120, 150), RGBColor(190, 210, 230)],
        Role::Globus => &[
            RGBColor(230, 120, 20),
            RGBColor(200, 50, 40),
            RGBColor(250, 170, 60),
            RGBColor(150, 30, 30),
            RGBColor(240, 100, 120),
            RGBColor(180, 110, 40),
        ],
        Role::Network => &[RGBColor(40, 150, 60), RGBColor(110, 200, 110), RGBColor(20, 90, 40)],
        Role::Disk => &[RGBColor(110, 110, 110), RGBColor(170, 170, 170), RGBColor(60, 60, 60)],
        Role::Cross => &[RGBColor(130, 70, 170), RGBColor(190, 140, 220)],
    };
    shades[i % shades.len()]
}

/// Colours for a list of series, numbering shades within each role.
fn colours(series: &[Series]) -> Vec<RGBColor> {
    let mut seen: Vec<Role> = Vec::new();
    series
        .iter()
        .map(|s| {
            let i = seen.iter().filter(|r| **r == s.role).count();
            seen.push(s.role);
            colour(s.role, i)
        })
        .collect()
}

fn draw_err<E: std::fmt::Debug>(path: &Path) -> impl Fn(E) -> BenchError + '_ {
    move |e| BenchError::output(format!("drawing {}", path.display()), format!("{e:?}"))
}

fn y_top(series: &[Series]) -> f64 {
    let top = series.iter().flat_map(|s| s.points.iter().map(|(_, v)| v.max)).fold(0.0, f64::max);
    if top > 0.0 {
        top * 1.12
    } else {
        1.0
    }
}

fn legend(area: &DrawingArea<SVGBackend<'_>, Shift>, series: &[Series], colours: &[RGBColor]) -> Result<(), String> {
    let font = ("sans-serif", 13).into_font();
    for (i, (s, c)) in series.iter().zip(colours).enumerate() {
        let y = 40 + i as i32 * 22;
        area.draw(&Rectangle::new([(8, y - 6), (24, y + 6)], c.filled())).map_err(|e| format!("{e:?}"))?;
        let name: String = s.name.chars().take(44).collect();
        area.draw(&Text::new(name, (30, y - 7), font.clone())).map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}

/// Above this ratio between the largest and the smallest bar, the y axis
/// is logarithmic: a many-files chart holds loopback copies at hundreds of
/// MB/s beside long-path copies at a few, and iperf3 beside both.
const LOG_SCALE_RATIO: f64 = 30.0;

/// Grouped bars: one group per category, one bar per series present in it.
pub fn bars(path: &Path, title: &str, y_label: &str, categories: &[String], series: &[Series]) -> Result<()> {
    let err = draw_err(path);
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let (chart_area, legend_area) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let n = categories.len().max(1);
    let x_range = -0.5f64..(n as f64 - 0.5);
    let smallest = series.iter().flat_map(|s| s.points.iter().map(|(_, v)| v.min)).fold(f64::INFINITY, f64::min);
    let largest = series.iter().flat_map(|s| s.points.iter().map(|(_, v)| v.max)).fold(0.0, f64::max);
    let log = smallest > 0.0 && largest / smallest > LOG_SCALE_RATIO;
    let mut builder = ChartBuilder::on(&chart_area);
    builder.margin(12).x_label_area_size(40).y_label_area_size(70);
    let cols = colours(series);
    if log {
        let base = smallest / 2.0;
        builder.caption(format!("{title} (log scale)"), ("sans-serif", 18));
        let mut chart = builder.build_cartesian_2d(x_range, (base..largest * 1.5).log_scale()).map_err(&err)?;
        draw_bars_on(&mut chart, base, categories, series, &cols, y_label, path)?;
    } else {
        builder.caption(title, ("sans-serif", 18));
        let mut chart = builder.build_cartesian_2d(x_range, 0f64..y_top(series)).map_err(&err)?;
        draw_bars_on(&mut chart, 0.0, categories, series, &cols, y_label, path)?;
    }
    legend(&legend_area, series, &cols).map_err(|e| BenchError::output(format!("drawing {}", path.display()), e))?;
    root.present().map_err(&err)?;
    Ok(())
}

/// The mesh and bars of [`bars`], on a linear or a logarithmic y axis.
fn draw_bars_on<Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
    base: f64,
    categories: &[String],
    series: &[Series],
    cols: &[RGBColor],
    y_label: &str,
    path: &Path,
) -> Result<()>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let err = draw_err(path);
    let labels = categories.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(categories.len().max(1))
        .x_label_formatter(&|x| label_at(&labels, *x))
        .y_label_formatter(&|y| y_tick(*y))
        .max_light_lines(4)
        .y_desc(y_label)
        .draw()
        .map_err(&err)?;
    for (g, _) in categories.iter().enumerate() {
        let present: Vec<usize> =
            (0..series.len()).filter(|&i| series[i].points.iter().any(|(c, _)| *c == g)).collect();
        let slot = 0.8 / present.len().max(1) as f64;
        for (k, &i) in present.iter().enumerate() {
            let Some((_, v)) = series[i].points.iter().find(|(c, _)| *c == g) else { continue };
            let x0 = g as f64 - 0.4 + k as f64 * slot;
            let x1 = x0 + slot * 0.9;
            chart
                .draw_series(std::iter::once(Rectangle::new([(x0, base), (x1, v.median)], cols[i].filled())))
                .map_err(&err)?;
            if v.max > v.min {
                let xm = (x0 + x1) / 2.0;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(xm, v.min), (xm, v.max)],
                        BLACK.stroke_width(1),
                    )))
                    .map_err(&err)?;
            }
        }
    }
    Ok(())
}

/// Lines over categorical x positions (e.g. one-way delays 0, 10 µs … 80 ms,
/// evenly spaced because they span four decades and include zero).
pub fn lines(path: &Path, title: &str, x_desc: &str, y_label: &str, xs: &[String], series: &[Series]) -> Result<()> {
    let err = draw_err(path);
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let (chart_area, legend_area) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let n = xs.len().max(1);
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.3f64..(n as f64 - 0.7), 0f64..y_top(series))
        .map_err(&err)?;
    let labels = xs.to_vec();
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| label_at(&labels, *x))
        .y_label_formatter(&|y| y_tick(*y))
        .max_light_lines(4)
        .x_desc(x_desc)
        .y_desc(y_label)
        .draw()
        .map_err(&err)?;
    let cols = colours(series);
    for (s, c) in series.iter().zip(&cols) {
        let mut pts: Vec<(f64, f64)> = s.points.iter().map(|(x, v)| (*x as f64, v.median)).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2))).map_err(&err)?;
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled()))).map_err(&err)?;
        for (x, v) in &s.points {
            if v.max > v.min {
                let x = *x as f64;
                chart
                    .draw_series(std::iter::once(PathElement::new(vec![(x, v.min), (x, v.max)], c.stroke_width(1))))
                    .map_err(&err)?;
            }
        }
    }
    legend(&legend_area, series, &cols).map_err(|e| BenchError::output(format!("drawing {}", path.display()), e))?;
    root.present().map_err(&err)?;
    Ok(())
}

/// Axis ticks without spurious decimals: "5000", "0.25".
fn y_tick(y: f64) -> String {
    if y.abs() >= 10.0 || y == 0.0 {
        format!("{y:.0}")
    } else {
        let s = format!("{y:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The category name at an integer axis position, nothing elsewhere.
fn label_at(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    labels.get(i as usize).cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_only_at_integers() {
        let l = vec!["a".to_string(), "b".to_string()];
        assert_eq!(label_at(&l, 1.0), "b");
        assert_eq!(label_at(&l, 0.5), "");
        assert_eq!(label_at(&l, 2.0), "");
        assert_eq!(label_at(&l, -1.0), "");
    }

    #[test]
    fn ticks() {
        assert_eq!(y_tick(5000.0), "5000");
        assert_eq!(y_tick(0.0), "0");
        assert_eq!(y_tick(0.25), "0.25");
        assert_eq!(y_tick(1.5), "1.5");
    }

    #[test]
    fn writes_svg() {
        let dir = tempfile::tempdir().unwrap();
        let s = vec![
            Series {
                name: "ferry cp -p 1".into(),
                role: Role::Ferry,
                points: vec![(0, Summary::of([1.0, 2.0]).unwrap())],
            },
            Series {
                name: "globus-url-copy -p 1".into(),
                role: Role::Globus,
                points: vec![(0, Summary::of([1.5]).unwrap()), (1, Summary::of([3.0]).unwrap())],
            },
        ];
        let cats = vec!["one".to_string(), "two".to_string()];
        let p = dir.path().join("b.svg");
        bars(&p, "t", "MB/s", &cats, &s).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.contains("<svg") && svg.contains("globus-url-copy -p 1"));
        let wide = vec![
            Series { name: "a".into(), role: Role::Ferry, points: vec![(0, Summary::of([2.0]).unwrap())] },
            Series { name: "b".into(), role: Role::Network, points: vec![(1, Summary::of([3000.0]).unwrap())] },
        ];
        let p = dir.path().join("log.svg");
        bars(&p, "t", "MB/s", &cats, &wide).unwrap();
        assert!(std::fs::read_to_string(&p).unwrap().contains("(log scale)"));
        let p = dir.path().join("l.svg");
        lines(&p, "t", "one-way delay", "MB/s", &cats, &s).unwrap();
        assert!(std::fs::read_to_string(&p).unwrap().contains("ferry cp -p 1"));
    }
}
