//! Samples, quantiles and ratios.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// Summary of one variant's samples, in milliseconds.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub n: usize,
    pub median_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Every sample, in the order measured (ms).
    pub samples_ms: Vec<f64>,
}

/// Linear-interpolated quantile (R type 7) of sorted data.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

pub fn summarize(samples: &[f64]) -> Summary {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let mean = if s.is_empty() {
        f64::NAN
    } else {
        s.iter().sum::<f64>() / s.len() as f64
    };
    Summary {
        n: s.len(),
        median_ms: quantile(&s, 0.5),
        p90_ms: quantile(&s, 0.9),
        p95_ms: quantile(&s, 0.95),
        min_ms: s.first().copied().unwrap_or(f64::NAN),
        max_ms: s.last().copied().unwrap_or(f64::NAN),
        mean_ms: mean,
        samples_ms: samples.to_vec(),
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Named sample sets of one phase, in insertion order of first use.
#[derive(Default, Debug)]
pub struct Samples {
    order: Vec<String>,
    data: BTreeMap<String, Vec<f64>>,
}

impl Samples {
    pub fn push(&mut self, name: &str, d: Duration) {
        self.push_ms(name, ms(d));
    }

    pub fn push_ms(&mut self, name: &str, v: f64) {
        if !self.data.contains_key(name) {
            self.order.push(name.to_string());
        }
        self.data.entry(name.to_string()).or_default().push(v);
    }

    pub fn summary(&self, name: &str) -> Option<Summary> {
        self.data.get(name).map(|v| summarize(v))
    }

    pub fn median(&self, name: &str) -> f64 {
        self.summary(name).map_or(f64::NAN, |s| s.median_ms)
    }

    pub fn p90(&self, name: &str) -> f64 {
        self.summary(name).map_or(f64::NAN, |s| s.p90_ms)
    }

    pub fn p95(&self, name: &str) -> f64 {
        self.summary(name).map_or(f64::NAN, |s| s.p95_ms)
    }

    /// The sum of a variant's samples (ms).
    pub fn total(&self, name: &str) -> f64 {
        self.data.get(name).map_or(f64::NAN, |v| v.iter().sum())
    }

    pub fn names(&self) -> &[String] {
        &self.order
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for n in &self.order {
            if let Some(s) = self.summary(n) {
                m.insert(n.clone(), serde_json::to_value(s).unwrap_or_default());
            }
        }
        serde_json::Value::Object(m)
    }
}

/// The order of variants for iteration `i`: a rotation, so that every variant
/// runs in every position equally often (no systematic first/last bias).
pub fn rotation(len: usize, i: usize) -> Vec<usize> {
    (0..len).map(|k| (k + i) % len).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&s, 0.5), 3.0);
        assert!((quantile(&s, 0.9) - 4.6).abs() < 1e-9);
        let t = summarize(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!(t.median_ms, 2.5);
        assert_eq!(rotation(3, 1), vec![1, 2, 0]);
    }
}
