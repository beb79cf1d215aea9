//! A component shaped like a record filter, used to check that refract refuses it as a policy.

wit_bindgen::generate!({
    inline: "
        package refract:plugin@0.1.0;
        interface lifecycle { init: func(config: string) -> result<_, string>; }
        interface record-filter { filter: func(values: list<u32>) -> list<bool>; }
        world filter-shaped { export lifecycle; export record-filter; }
    ",
    world: "filter-shaped",
});

struct Filter;

impl exports::refract::plugin::lifecycle::Guest for Filter {
    fn init(_config: String) -> Result<(), String> {
        Ok(())
    }
}

impl exports::refract::plugin::record_filter::Guest for Filter {
    fn filter(values: Vec<u32>) -> Vec<bool> {
        values.iter().map(|v| v % 2 == 0).collect()
    }
}

export!(Filter);
