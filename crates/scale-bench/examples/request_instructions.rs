//! `request_instructions <static|layered> <gets>`: one client's GETs, one at a time, against
//! the per-request A/B's loopback server, on a single-threaded runtime.
//!
//! For counting instructions (`hack/instructions.sh`): on one thread the tasks take turns in
//! the same order on every run, so the count moves by a few tenths of a percent at most from run
//! to run, where the A/B's wall times move with the machine by more than its goal's margin.
//! The difference of two runs of different lengths is the cost of a GET, start-up excluded.

use anyhow::Context as _;
use scale_bench::overhead::{Loopback, get};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: request_instructions <static|layered> <gets>";
    let which = args.next().context(usage)?;
    let gets: usize = args.next().context(usage)?.parse().context(usage)?;
    let server = Loopback::start().await?;
    let client = match which.as_str() {
        "static" => server.static_client()?,
        "layered" => server.layered_client()?,
        _ => anyhow::bail!(usage),
    };
    for _ in 0..gets {
        get(&client).await?;
    }
    Ok(())
}
