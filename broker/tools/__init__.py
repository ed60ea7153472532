"""kcoord's command-line tools for a running broker: clients, as Kafka's own tools are."""
