"""Who a party is and whom it trusts: the run CA, certificates, the identity rule, revocation, TLS."""
