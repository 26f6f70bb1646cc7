//! [`FleetArgs`]: the fleet's size on the command line, the same for every binary that starts
//! one.

use super::fleet::Fleet;

/// How many members, on how many apiservers, made how fast.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct FleetArgs {
    /// Logical member clusters, each its own ServiceAccount and Secret.
    #[arg(long, default_value_t = 1000)]
    pub members: usize,
    /// Member apiservers they share (`memberN` uses apiserver `N mod A`).
    #[arg(long, default_value_t = 3)]
    pub apiservers: usize,
    /// API calls in flight while creating and rotating members.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
}

impl FleetArgs {
    /// Starts the fleet these arguments describe.
    ///
    /// # Errors
    /// [`Fleet::start`]'s.
    pub async fn start(&self) -> anyhow::Result<Fleet> {
        Fleet::start(self.members, self.apiservers, self.concurrency).await
    }
}
