//! The process table's rows as last drawn, kept with what each was made of, so that a row
//! whose inputs did not change is drawn again from its text rather than built (issue 28). The
//! table ([`super::table`]) builds and draws rows; the app ([`super::app`]) keeps them between
//! frames.

use super::rows::Line;
use super::snapshot::ProcessRow;

/// Everything a table row's text is made of: the row's text is a function of these alone
/// (`table::row_text`), so a row whose inputs are equal to the last frame's is drawn from the text
/// kept then ([`DrawnRows`]).
#[derive(PartialEq)]
pub struct RowInputs<'a> {
    pub width: u16,
    pub line: &'a Line,
    pub row: Option<&'a ProcessRow>,
    pub flagged: bool,
}

/// A table row as drawn: its inputs (owned) and its text.
#[derive(Debug, Clone)]
struct DrawnRow {
    width: u16,
    line: Line,
    row: Option<ProcessRow>,
    flagged: bool,
    text: String,
}

impl DrawnRow {
    fn of(i: &RowInputs<'_>, text: String) -> DrawnRow {
        DrawnRow {
            width: i.width,
            line: i.line.clone(),
            row: i.row.cloned(),
            flagged: i.flagged,
            text,
        }
    }

    /// Copies from `row` the one thing a row holds that no cell shows and that changes every
    /// sample (when NVML's utilization samples start), so that equal inputs mean equal text.
    fn align_unshown(&mut self, row: Option<&ProcessRow>) {
        let now = row.and_then(|r| r.gpu.utilization.as_ref());
        let kept = self.row.as_mut().and_then(|r| r.gpu.utilization.as_mut());
        if let (Some(kept), Some(now)) = (kept, now) {
            kept.since_unix_us = now.since_unix_us;
        }
    }

    fn inputs(&self) -> RowInputs<'_> {
        RowInputs {
            width: self.width,
            line: &self.line,
            row: self.row.as_ref(),
            flagged: self.flagged,
        }
    }
}

/// The table's rows as last drawn, by their place on the screen (the first row shown first).
#[derive(Debug, Clone, Default)]
pub struct DrawnRows {
    rows: Vec<Option<DrawnRow>>,
    /// How many rows were built rather than taken from here (tests check what is kept).
    pub built: u64,
}

impl DrawnRows {
    /// The text of the row drawn at `place` (0: the first shown) from `inputs`: the kept text
    /// when the row there was made of equal inputs, else `build`'s, kept for the next frame.
    pub fn text(
        &mut self,
        place: usize,
        inputs: &RowInputs<'_>,
        build: impl FnOnce(&RowInputs<'_>) -> String,
    ) -> &str {
        if self.rows.len() <= place {
            self.rows.resize_with(place + 1, || None);
        }
        let kept = &mut self.rows[place];
        if let Some(k) = kept.as_mut() {
            k.align_unshown(inputs.row);
        }
        if !kept.as_ref().is_some_and(|k| k.inputs() == *inputs) {
            *kept = None;
            self.built += 1;
        }
        &kept
            .get_or_insert_with(|| DrawnRow::of(inputs, build(inputs)))
            .text
    }

    /// Forgets the rows from `len` on (the table got shorter).
    pub fn truncate(&mut self, len: usize) {
        self.rows.truncate(len);
    }
}
