"""`scheduler bench`: one module per scenario, each with `run(options) -> ScenarioResult`."""
