use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::TopicPartitionList;
use std::time::{Duration, Instant};

fn main() {
    let bs = std::env::args().nth(1).unwrap();
    for i in 0..6 {
        let t = Instant::now();
        {
            let c: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &bs)
                .set("group.id", format!("g{}", i % 2))
                .set("enable.auto.commit", "false")
                .create()
                .unwrap();
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition("probe2", 0);
            let r = c.committed_offsets(tpl, Duration::from_secs(10));
            println!(
                "{i}: committed {:?} after {:?}",
                r.map(|t| t.count()),
                t.elapsed()
            );
        }
        println!("{i}: dropped after {:?}", t.elapsed());
    }
}
