//! One budget per batch for each processor of a chain. A processor's limits (`call_timeout`,
//! `max_output_bytes`, `max_outputs_per_call`) bound one call; a chain may call it several
//! times on one batch: once per run of records bound for the same topic, and, after a failed
//! call with `on_error = "dead-letter"` or `"skip"`, once for each record alone. Each of those
//! calls gets a fresh instance, but not a fresh allowance: they all draw on one [`BatchBudget`]
//! of [`BATCH_BUDGET_CALLS`] calls' limits, so a plugin that fails every batch of more than one
//! record costs at most that, however large the batch. Once it is spent, the records not yet
//! processed follow `on_error` with a reason naming the budget, and no call is made.
//!
//! Three calls: the call on the batch, which may run into its deadline, the retry of the record
//! that made it fail, which may too, and the retries of the others, which a healthy plugin
//! answers in moments. So one record that hangs a plugin still costs only itself; a batch with
//! two costs the records after the second.
//!
//! The output bytes a budget allows are counted beyond the bytes of the records the calls were
//! sent (a transform that rewrites every record returns about as much as it got).

use std::time::Duration;

use refract_plugin::{CallBudget, Outcome, PluginLimits};

/// How many calls' limits one processor's calls on one batch share.
pub const BATCH_BUDGET_CALLS: u32 = 3;

/// What one processor may still spend on the batch the chain is processing.
#[derive(Debug, Clone)]
pub(crate) struct BatchBudget {
    /// One call's limits.
    limits: PluginLimits,
    /// The batch's: [`BATCH_BUDGET_CALLS`] calls' time, output bytes and output records.
    time: Duration,
    output_bytes: usize,
    outputs: u64,
    /// Time its calls on the batch took.
    spent: Duration,
    /// Output bytes beyond their inputs its calls returned (never below zero).
    extra_bytes: usize,
    /// Records its calls returned.
    returned: u64,
    /// Set once a call ran into what was left of the budget: why no call may be made now.
    exhausted: Option<String>,
}

impl BatchBudget {
    /// A fresh budget of `limits` for one batch.
    pub(crate) fn new(limits: PluginLimits) -> Self {
        Self {
            limits,
            time: limits.call_deadline.saturating_mul(BATCH_BUDGET_CALLS),
            output_bytes: limits
                .max_output_bytes
                .saturating_mul(BATCH_BUDGET_CALLS as usize),
            outputs: u64::from(limits.max_outputs_per_call) * u64::from(BATCH_BUDGET_CALLS),
            spent: Duration::ZERO,
            extra_bytes: 0,
            returned: 0,
            exhausted: None,
        }
    }

    /// What the next call may use, or why no call may be made (the budget is spent).
    pub(crate) fn next_call(&self) -> Result<CallBudget, String> {
        if let Some(why) = &self.exhausted {
            return Err(format!(
                "not processed: the batch's budget is spent ({why})"
            ));
        }
        let time = self.time.saturating_sub(self.spent);
        if time.is_zero() {
            return Err(format!(
                "not processed: the batch's time budget is spent ({} ms of {} ms: {BATCH_BUDGET_CALLS} x call_timeout, which its calls on the batch share, the retries of its records one by one included)",
                self.spent.as_millis(),
                self.time.as_millis()
            ));
        }
        if let Some(why) = self.over() {
            return Err(format!("not processed: {why}"));
        }
        Ok(CallBudget {
            time: Some(time),
            output_bytes: Some(self.output_bytes - self.extra_bytes),
        })
    }

    /// Why the outputs returned so far spent the budget, if they did.
    fn over(&self) -> Option<String> {
        let shared =
            "which its calls on the batch share, the retries of its records one by one included";
        if self.returned >= self.outputs {
            return Some(format!(
                "the batch's output budget is spent ({} records of {}: {BATCH_BUDGET_CALLS} x max_outputs_per_call, {shared})",
                self.returned, self.outputs
            ));
        }
        if self.extra_bytes >= self.output_bytes {
            return Some(format!(
                "the batch's output budget is spent ({} bytes beyond their inputs of {}: {BATCH_BUDGET_CALLS} x max_output_bytes, {shared})",
                self.extra_bytes, self.output_bytes
            ));
        }
        None
    }

    /// Whether a call's budget was smaller than a call's own limits: a deadline or output
    /// budget it ran into was what was left of the batch's.
    pub(crate) fn cut(&self, call: &CallBudget) -> bool {
        call.time.is_some_and(|t| t < self.limits.call_deadline)
            || call
                .output_bytes
                .is_some_and(|b| b < self.limits.max_output_bytes)
    }

    /// Takes a call that took `took`, was sent `input_bytes` and answered `outcomes` off the
    /// budget; `Err` with the reason when its outputs took the batch past it (the call's outputs
    /// are then not used).
    pub(crate) fn spend(
        &mut self,
        took: Duration,
        input_bytes: usize,
        outcomes: Option<&[Outcome]>,
    ) -> Result<(), String> {
        self.spent += took;
        let Some(outcomes) = outcomes else {
            return Ok(());
        };
        let (records, bytes) = outcomes
            .iter()
            .filter_map(|o| match o {
                Outcome::Replace(records) => Some(records),
                _ => None,
            })
            .flatten()
            .fold((0u64, 0usize), |(n, bytes), r| {
                let size = r.topic.as_ref().map_or(0, String::len)
                    + r.key.as_ref().map_or(0, Vec::len)
                    + r.value.as_ref().map_or(0, Vec::len)
                    + r.headers
                        .iter()
                        .map(|h| h.key.len() + h.value.as_ref().map_or(0, Vec::len))
                        .sum::<usize>();
                (n + 1, bytes + size)
            });
        self.returned += records;
        self.extra_bytes += bytes.saturating_sub(input_bytes);
        let past = self.returned > self.outputs || self.extra_bytes > self.output_bytes;
        match self.over() {
            Some(why) if past => Err(format!("its outputs took the batch past its budget: {why}")),
            _ => Ok(()),
        }
    }

    /// Marks the budget spent: a call ran into what was left of it (`why`).
    pub(crate) fn exhaust(&mut self, why: &str) {
        self.exhausted.get_or_insert_with(|| why.to_string());
    }
}

#[cfg(test)]
mod tests {
    use refract_plugin::OutputRecord;

    use super::*;

    fn limits() -> PluginLimits {
        PluginLimits {
            call_deadline: Duration::from_millis(1000),
            max_output_bytes: 1000,
            max_outputs_per_call: 10,
            ..PluginLimits::default()
        }
    }

    fn replace(value_bytes: usize, copies: usize) -> Outcome {
        Outcome::Replace(
            (0..copies)
                .map(|_| OutputRecord {
                    topic: None,
                    partition: None,
                    timestamp_ms: None,
                    key: None,
                    value: Some(vec![0; value_bytes]),
                    headers: Vec::new(),
                })
                .collect(),
        )
    }

    #[test]
    fn calls_share_the_time_and_what_is_left_is_handed_on() {
        let mut b = BatchBudget::new(limits());
        let first = b.next_call().unwrap();
        assert_eq!(first.time, Some(Duration::from_millis(3000)));
        assert!(!b.cut(&first), "a call may use its own limits");
        b.spend(Duration::from_millis(1000), 0, None).unwrap();
        b.spend(Duration::from_millis(1700), 0, None).unwrap();
        let last = b.next_call().unwrap();
        assert_eq!(last.time, Some(Duration::from_millis(300)));
        assert!(b.cut(&last));
        b.spend(Duration::from_millis(300), 0, None).unwrap();
        let spent = b.next_call().unwrap_err();
        assert!(spent.contains("time budget is spent"), "{spent}");
        assert!(
            spent.contains("3000 ms of 3000 ms: 3 x call_timeout"),
            "{spent}"
        );
    }

    #[test]
    fn output_bytes_beyond_the_inputs_are_shared() {
        let mut b = BatchBudget::new(limits());
        // As much out as in costs nothing.
        b.spend(Duration::ZERO, 500, Some(&[replace(500, 1)]))
            .unwrap();
        assert_eq!(b.next_call().unwrap().output_bytes, Some(3000));
        b.spend(Duration::ZERO, 100, Some(&[replace(2700, 1)]))
            .unwrap();
        assert_eq!(b.next_call().unwrap().output_bytes, Some(400));
        let over = b
            .spend(Duration::ZERO, 0, Some(&[replace(401, 1)]))
            .unwrap_err();
        assert!(
            over.contains("3001 bytes beyond their inputs of 3000: 3 x max_output_bytes"),
            "{over}"
        );
        assert!(b
            .next_call()
            .unwrap_err()
            .contains("output budget is spent"));
    }

    #[test]
    fn output_records_are_shared() {
        let mut b = BatchBudget::new(limits());
        b.spend(Duration::ZERO, 0, Some(&[replace(0, 26), Outcome::Keep]))
            .unwrap();
        let over = b
            .spend(Duration::ZERO, 0, Some(&[replace(0, 5)]))
            .unwrap_err();
        assert!(
            over.contains("31 records of 30: 3 x max_outputs_per_call"),
            "{over}"
        );
        assert!(b
            .next_call()
            .unwrap_err()
            .contains("output budget is spent"));
    }

    #[test]
    fn a_call_that_ran_into_the_rest_of_the_budget_spends_it() {
        let mut b = BatchBudget::new(limits());
        b.exhaust("a call ran into what was left of its call_timeout");
        let why = b.next_call().unwrap_err();
        assert!(
            why.starts_with("not processed: the batch's budget is spent (a call ran into"),
            "{why}"
        );
    }
}
