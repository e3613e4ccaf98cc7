//! [`RuntimeStatus`]: a device's runtime power state, as sysfs spells it.

use super::spelling::spelled;

spelled! {
    /// A device's runtime power state: the kernel's `power/runtime_status` values
    /// (`Documentation/ABI/testing/sysfs-devices-power`). JSON spells each as the kernel does;
    /// [`RuntimeStatus::parse`] reads the file's text (pure; unknown text is kept as
    /// [`RuntimeStatus::Other`]).
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum RuntimeStatus {
        /// `active`: powered and usable.
        Active = "active",
        /// `suspended`: asleep; reading its attributes would wake it (or fail).
        Suspended = "suspended",
        /// `suspending`: on its way to sleep.
        Suspending = "suspending",
        /// `resuming`: waking up.
        Resuming = "resuming",
        /// `error`: runtime power management failed.
        Error = "error",
        /// `unsupported`: runtime power management is not enabled for it.
        Unsupported = "unsupported",
    } else {
        /// Any other text the file held, as read (trimmed).
        Other(String),
    }
}
