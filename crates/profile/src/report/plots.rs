//! SVG plots for the HTML report, drawn with plotters into strings so the
//! page embeds them inline and needs no external file or script.
//!
//! plotters is built without a font rasteriser (no `ttf` feature): the SVG
//! backend writes text as `<text>` elements and the browser renders it, so
//! no font files or system libraries are needed to build a report.

use plotters::prelude::*;

use crate::error::{ProfileError, Result};

pub(crate) const WIDTH: u32 = 960;
pub(crate) const HEIGHT: u32 = 300;

/// One line of a chart.
pub(crate) struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// One band of a stacked chart, bottom band first.
pub(crate) struct Layer {
    pub name: &'static str,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
}

fn plot_err(plot: &'static str) -> impl Fn(DrawingAreaErrorKind<std::io::Error>) -> ProfileError {
    move |e| ProfileError::Plot { plot, detail: e.to_string() }
}

/// Tick labels for an axis from 0 to `top`: scaled to k or M for large
/// values, with as many decimals as the tick step needs, so neighbouring
/// labels always differ (a disk axis from 0 to 0.12 MiB/s reads 0.02,
/// 0.04, ... rather than 0.0, 0.0, 0.1).
pub(crate) fn tick_formatter(top: f64) -> impl Fn(&f64) -> String {
    let (scale, suffix) = if top >= 1e6 {
        (1e6, "M")
    } else if top >= 1e4 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    // plotters puts about ten labels on an axis; their step is a 1-2-5
    // multiple of top/10.
    let step = (top / 10.0 / scale).max(f64::MIN_POSITIVE);
    let decimals = (-step.log10().floor()).clamp(0.0, 9.0) as usize;
    move |v: &f64| {
        if *v == 0.0 {
            "0".into()
        } else {
            format!("{:.*}{suffix}", decimals, v / scale)
        }
    }
}
/// A placeholder with the chart's title, for series with no points, so
/// the page's layout does not depend on which data exist.
pub(crate) fn empty(title: &str, why: &str) -> String {
    format!(
        r##"<svg width="{WIDTH}" height="80" viewBox="0 0 {WIDTH} 80" xmlns="http://www.w3.org/2000/svg"><rect width="100%" height="100%" fill="white"/><text x="10" y="28" font-family="sans-serif" font-size="18">{}</text><text x="10" y="58" font-family="sans-serif" font-size="14" fill="#777">{}</text></svg>"##,
        super::html::esc(title),
        super::html::esc(why)
    )
}

fn color(i: usize) -> RGBColor {
    // Palette99 without the near-white entries.
    const COLORS: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    COLORS[i % COLORS.len()]
}

type TimeChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The frame every chart of the report shares: title, time axis from 0 to
/// `x_top`, value axis from 0 to `y_top`, light grid.
fn time_frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    plot: &'static str,
    title: &str,
    y_label: &str,
    x_top: f64,
    y_top: f64,
) -> Result<TimeChart<'a, 'b>> {
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_top, 0f64..y_top)
        .map_err(plot_err(plot))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_label)
        .y_label_formatter(&tick_formatter(y_top))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(plot_err(plot))?;
    Ok(chart)
}

/// A named stretch of the time axis (one transfer or variant), shaded
/// behind the data so every chart shows which run each part belongs to.
pub(crate) struct Span {
    pub name: String,
    pub from: f64,
    pub to: f64,
}

fn draw_spans(chart: &mut TimeChart<'_, '_>, plot: &'static str, spans: &[Span], y_top: f64) -> Result<()> {
    for (i, sp) in spans.iter().enumerate() {
        let shade = if i % 2 == 0 { RGBColor(246, 246, 246) } else { RGBColor(236, 240, 246) };
        chart
            .draw_series(std::iter::once(Rectangle::new([(sp.from, 0.0), (sp.to, y_top)], shade.filled())))
            .map_err(plot_err(plot))?;
        // Narrow runs (a 0.3 s variant) keep their shade but not a label
        // that would run into the next one's.
        let (lo, hi) = (chart.x_range().start, chart.x_range().end);
        if (sp.to - sp.from) < 0.12 * (hi - lo) {
            continue;
        }
        chart
            .draw_series(std::iter::once(Text::new(
                sp.name.clone(),
                (sp.from, y_top * 0.985),
                ("sans-serif", 11).into_font().color(&RGBColor(110, 110, 110)),
            )))
            .map_err(plot_err(plot))?;
    }
    Ok(())
}

/// The legend box, top right.
fn legend<'a, 'b: 'a>(chart: &mut TimeChart<'a, 'b>, plot: &'static str) -> Result<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(plot_err(plot))
}

/// Lines over time; legend entries for at most 12 series.
pub(crate) fn line_chart(
    plot: &'static str,
    title: &str,
    y_label: &str,
    series: &[Series],
    spans: &[Span],
    x_max: f64,
) -> Result<String> {
    if series.iter().all(|s| s.points.is_empty()) {
        return Ok(empty(title, "no samples"));
    }
    let y_max = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
    let y_top = if y_max > 0.0 { y_max * 1.12 } else { 1.0 };
    let x_top = if x_max > 0.0 { x_max } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err(plot))?;
        let mut chart = time_frame(&root, plot, title, y_label, x_top, y_top)?;
        draw_spans(&mut chart, plot, spans, y_top)?;
        for (i, s) in series.iter().enumerate() {
            let c = color(i);
            let drawn = chart
                .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                .map_err(plot_err(plot))?;
            if i < 12 {
                drawn
                    .label(s.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
            }
        }
        if series.len() > 1 {
            legend(&mut chart, plot)?;
        }
        root.present().map_err(plot_err(plot))?;
    }
    Ok(svg)
}

/// Bands stacked on top of each other (CPU time by state).
// The chart's parts (bands, lines over them, run spans, axes) are all
// needed and of different kinds; a struct for one caller adds nothing.
#[allow(clippy::too_many_arguments)]
pub(crate) fn stacked_chart(
    plot: &'static str,
    title: &str,
    y_label: &str,
    layers: &[Layer],
    lines: &[Series],
    spans: &[Span],
    x_max: f64,
    y_max: f64,
) -> Result<String> {
    let Some(base) = layers.first().filter(|l| !l.points.is_empty()) else {
        return Ok(empty(title, "no samples"));
    };
    // Cumulative tops: layer i's top = sum of layers 0..=i at each x.
    let mut tops: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut acc: Vec<f64> = vec![0.0; base.points.len()];
    for l in layers {
        for (a, p) in acc.iter_mut().zip(&l.points) {
            *a += p.1;
        }
        tops.push(base.points.iter().zip(&acc).map(|(p, a)| (p.0, *a)).collect());
    }
    let x_top = if x_max > 0.0 { x_max } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err(plot))?;
        let mut chart = time_frame(&root, plot, title, y_label, x_top, y_max)?;
        draw_spans(&mut chart, plot, spans, y_max)?;
        // Draw the highest band first so each lower one paints over it.
        for (l, top) in layers.iter().zip(&tops).rev() {
            let c = l.color;
            chart
                .draw_series(AreaSeries::new(top.iter().copied(), 0.0, c.mix(0.85)).border_style(c))
                .map_err(plot_err(plot))?
                .label(l.name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
        }
        // Lines over the bands (the watched Ferry process), in greys.
        for (i, l) in lines.iter().enumerate() {
            let c = if i == 0 { RGBColor(0, 0, 0) } else { RGBColor(120, 120, 120) };
            chart
                .draw_series(LineSeries::new(l.points.iter().copied(), c.stroke_width(2)))
                .map_err(plot_err(plot))?
                .label(l.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        }
        legend(&mut chart, plot)?;
        root.present().map_err(plot_err(plot))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_ticks_differ() {
        // The issue's disk axis: ten ticks up to about 0.12 MiB/s.
        let f = tick_formatter(0.12);
        let labels: Vec<String> = (0..=6).map(|i| f(&(i as f64 * 0.02))).collect();
        assert_eq!(labels, ["0", "0.02", "0.04", "0.06", "0.08", "0.10", "0.12"]);
        let f = tick_formatter(250_000.0);
        assert_eq!((f(&25_000.0), f(&50_000.0)), ("25k".to_string(), "50k".to_string()));
        let f = tick_formatter(3.0e6);
        assert_eq!((f(&300_000.0), f(&600_000.0)), ("0.3M".to_string(), "0.6M".to_string()));
        let f = tick_formatter(100.0);
        assert_eq!(f(&10.0), "10");
    }
}
