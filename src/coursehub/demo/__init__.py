"""``coursehub demo``: the whole system on one machine (hub, proxy, course app, seeded course)."""
