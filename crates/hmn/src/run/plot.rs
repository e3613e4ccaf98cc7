//! `hmn run --plot FILE.svg`: RSS of the tree and VRAM per device over time, as an SVG line
//! chart (plotters, SVG backend). Written to a temporary file created before the command ran,
//! and renamed into place (see [`crate::outfile`]), so a failure never leaves a partial chart.
//!
//! Only what the chart draws is kept while the command runs ([`PlotSeries`]): per sample, the
//! tree's RSS sum and its VRAM per device — not the per-process samples — in at most
//! [`MAX_POINTS`] points. When a long run fills them, neighbouring points are merged two by two
//! (each keeping the larger value, so a peak is never smoothed away) and later samples are
//! merged as many at a time: memory stays bounded whatever the run's length or its number of
//! processes.

use std::collections::BTreeMap;
use std::io::Write as _;

use hypomnesis::sampler::Sample;
use plotters::prelude::*;

use crate::outfile::Sink;

const MIB: f64 = 1_048_576.0;

/// The most points a chart keeps (a 960-pixel-wide chart shows no more).
pub const MAX_POINTS: usize = 2048;

/// One point: the start of the samples it stands for, and their largest values.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Point {
    t_ms: u64,
    rss_bytes: u64,
    /// Tree VRAM per device index.
    vram_bytes: BTreeMap<u32, u64>,
}

impl Point {
    /// Folds a later point into this one: the earlier time, the larger values.
    fn absorb(&mut self, later: Point) {
        self.rss_bytes = self.rss_bytes.max(later.rss_bytes);
        for (d, v) in later.vram_bytes {
            let e = self.vram_bytes.entry(d).or_default();
            *e = (*e).max(v);
        }
    }
}

/// What the chart draws, collected sample by sample in bounded memory (see the
/// [module docs](self)).
#[derive(Debug, Clone)]
pub struct PlotSeries {
    points: Vec<Point>,
    /// Samples per point.
    stride: u64,
    /// The point being filled, and how many samples it holds.
    pending: Option<(Point, u64)>,
    /// The time of the last sample (the chart's right edge).
    last_t_ms: u64,
}

impl Default for PlotSeries {
    fn default() -> Self {
        PlotSeries {
            points: Vec::new(),
            stride: 1,
            pending: None,
            last_t_ms: 0,
        }
    }
}

impl PlotSeries {
    /// Adds one sample.
    pub fn push(&mut self, s: &Sample) {
        self.add(
            s.t_ms,
            s.rss_bytes,
            // An unknown figure is a gap in the device's line, not a 0.
            s.devices
                .iter()
                .filter_map(|d| Some((d.index, d.tree_vram_bytes?))),
        );
    }

    /// Adds one sample's figures: its time, the tree's RSS sum and its VRAM per device.
    fn add(&mut self, t_ms: u64, rss_bytes: u64, vram: impl Iterator<Item = (u32, u64)>) {
        self.last_t_ms = t_ms;
        let p = Point {
            t_ms,
            rss_bytes,
            vram_bytes: vram.collect(),
        };
        let (point, n) = match self.pending.take() {
            Some((mut acc, n)) => {
                acc.absorb(p);
                (acc, n + 1)
            }
            None => (p, 1),
        };
        if n < self.stride {
            self.pending = Some((point, n));
            return;
        }
        self.points.push(point);
        if self.points.len() >= MAX_POINTS {
            self.halve();
        }
    }

    /// Merges neighbouring points two by two, and merges twice as many samples per point from
    /// now on.
    fn halve(&mut self) {
        let mut merged = Vec::with_capacity(self.points.len() / 2 + 1);
        let mut it = std::mem::take(&mut self.points).into_iter();
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                a.absorb(b);
            }
            merged.push(a);
        }
        self.points = merged;
        self.stride = self.stride.saturating_mul(2);
    }

    /// The points, the one being filled included.
    fn all(&self) -> impl Iterator<Item = &Point> {
        self.points
            .iter()
            .chain(self.pending.iter().map(|(p, _)| p))
    }

    /// How many points it holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.all().count()
    }

    /// The series to draw: name → points (seconds, MiB).
    fn lines(&self) -> BTreeMap<String, Vec<(f64, f64)>> {
        let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for p in self.all() {
            let t = p.t_ms as f64 / 1000.0;
            out.entry("RSS (tree)".to_string())
                .or_default()
                .push((t, p.rss_bytes as f64 / MIB));
            for (d, v) in &p.vram_bytes {
                out.entry(format!("VRAM GPU {d} (tree)"))
                    .or_default()
                    .push((t, *v as f64 / MIB));
            }
        }
        out
    }
}

/// Renders the chart as SVG text.
pub fn render(series: &PlotSeries) -> anyhow::Result<String> {
    let lines = series.lines();
    let t_max = (series.last_t_ms as f64 / 1000.0).max(0.001);
    let y_max = lines
        .values()
        .flatten()
        .map(|p| p.1)
        .fold(1.0_f64, f64::max)
        * 1.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .caption("hmn run: memory of the process tree", ("sans-serif", 20))
            .build_cartesian_2d(0.0..t_max, 0.0..y_max)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("MiB")
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let colours = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
        for (i, (name, points)) in lines.into_iter().enumerate() {
            let colour = colours.get(i % colours.len()).copied().unwrap_or(BLACK);
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(svg)
}

/// Renders the chart and writes it to `sink` (stdout, or a file put in place on success).
pub fn write_svg(mut sink: Sink, series: &PlotSeries) -> anyhow::Result<()> {
    let svg = render(series)?;
    sink.write_all(svg.as_bytes())?;
    sink.flush()?;
    sink.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_short_run_keeps_every_sample() {
        let mut s = PlotSeries::default();
        for i in 0..10 {
            s.add(i * 100, i * MIB, [(0, 2 * i * MIB)].into_iter());
        }
        assert_eq!(s.len(), 10);
        let lines = s.lines();
        assert_eq!(lines["RSS (tree)"][9], (0.9, 9.0));
        assert_eq!(lines["VRAM GPU 0 (tree)"][9], (0.9, 18.0));
    }

    #[test]
    fn a_long_run_is_bounded_and_keeps_its_peaks() {
        let mut s = PlotSeries::default();
        // A day at 10 samples a second; one spike of one sample in the middle.
        let n: u64 = 864_000;
        for i in 0..n {
            let spike = i == n / 2 + 7;
            let rss = if spike { 5_000 * MIB } else { 100 * MIB };
            let vram = if spike { 70_000 * MIB } else { MIB };
            s.add(i * 100, rss, [(0, vram), (1, 0)].into_iter());
            assert!(s.len() <= MAX_POINTS, "{} points at sample {i}", s.len());
        }
        assert!(s.len() >= MAX_POINTS / 2, "{}", s.len());
        let lines = s.lines();
        let max = |name: &str| lines[name].iter().map(|p| p.1).fold(0.0, f64::max);
        assert_eq!(max("RSS (tree)"), 5_000.0, "the one-sample spike survives");
        assert_eq!(max("VRAM GPU 0 (tree)"), 70_000.0);
        assert_eq!(max("VRAM GPU 1 (tree)"), 0.0);
        let ts: Vec<f64> = lines["RSS (tree)"].iter().map(|p| p.0).collect();
        assert!(ts.windows(2).all(|w| w[0] < w[1]), "time runs forward");
        assert_eq!(s.last_t_ms, (n - 1) * 100);
        let svg = render(&s).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("RSS (tree)"));
    }
}
