"""The shared protocol kit: role base, transport interface, wire codec, integration, checks every protocol uses."""
