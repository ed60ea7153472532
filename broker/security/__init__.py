"""Kafka's security layer: TLS listeners, SASL authentication (PLAIN and
SCRAM), the principal of each connection, and the SCRAM credentials kept in the
data dir."""
