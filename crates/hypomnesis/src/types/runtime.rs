//! [`RuntimeStatus`]: a device's runtime power state, as sysfs spells it.

/// A device's runtime power state: the kernel's `power/runtime_status` values
/// (`Documentation/ABI/testing/sysfs-devices-power`). JSON spells each as the kernel does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RuntimeStatus {
    /// `active`: powered and usable.
    Active,
    /// `suspended`: asleep; reading its attributes would wake it (or fail).
    Suspended,
    /// `suspending`: on its way to sleep.
    Suspending,
    /// `resuming`: waking up.
    Resuming,
    /// `error`: runtime power management failed.
    Error,
    /// `unsupported`: runtime power management is not enabled for it.
    Unsupported,
    /// Any other text the file held, as read (trimmed).
    Other(String),
}

impl RuntimeStatus {
    /// The kernel's (and JSON's) spelling.
    pub fn as_str(&self) -> &str {
        match self {
            RuntimeStatus::Active => "active",
            RuntimeStatus::Suspended => "suspended",
            RuntimeStatus::Suspending => "suspending",
            RuntimeStatus::Resuming => "resuming",
            RuntimeStatus::Error => "error",
            RuntimeStatus::Unsupported => "unsupported",
            RuntimeStatus::Other(s) => s,
        }
    }

    /// The status `power/runtime_status` names (pure; unknown text is kept as
    /// [`RuntimeStatus::Other`]).
    pub fn parse(text: &str) -> RuntimeStatus {
        match text {
            "active" => RuntimeStatus::Active,
            "suspended" => RuntimeStatus::Suspended,
            "suspending" => RuntimeStatus::Suspending,
            "resuming" => RuntimeStatus::Resuming,
            "error" => RuntimeStatus::Error,
            "unsupported" => RuntimeStatus::Unsupported,
            other => RuntimeStatus::Other(other.to_string()),
        }
    }
}
