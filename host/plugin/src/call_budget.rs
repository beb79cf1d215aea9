//! A call's share of a budget several calls draw from. The mirror gives each processor one
//! budget per batch of records (its `call_timeout` and `max_output_bytes`), spent by the call on
//! the batch and by the calls that retry its records one by one after that call failed; each
//! of those calls may use only what is left, never a fresh allowance.

use std::time::Duration;

use crate::runtime::PluginLimits;

/// What one call may use at most, below the plugin's own limits (`None`: the plugin's limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallBudget {
    /// Wall time left; the call is stopped once it is spent (never later than `call_timeout`).
    pub time: Option<Duration>,
    /// Output bytes left beyond the call's input (never more than `max_output_bytes`).
    pub output_bytes: Option<usize>,
}

impl CallBudget {
    /// The limits one call runs under: the plugin's, cut down to this budget.
    pub(crate) fn apply(&self, limits: &PluginLimits) -> PluginLimits {
        PluginLimits {
            call_deadline: self
                .time
                .map_or(limits.call_deadline, |t| t.min(limits.call_deadline)),
            max_output_bytes: self
                .output_bytes
                .map_or(limits.max_output_bytes, |b| b.min(limits.max_output_bytes)),
            ..*limits
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_only_ever_cuts_the_limits_down() {
        let limits = PluginLimits::default();
        assert_eq!(CallBudget::default().apply(&limits), limits);
        let cut = CallBudget {
            time: Some(Duration::from_millis(200)),
            output_bytes: Some(1000),
        }
        .apply(&limits);
        assert_eq!(cut.call_deadline, Duration::from_millis(200));
        assert_eq!(cut.max_output_bytes, 1000);
        let over = CallBudget {
            time: Some(Duration::from_secs(60)),
            output_bytes: Some(usize::MAX),
        }
        .apply(&limits);
        assert_eq!(over, limits);
    }
}
