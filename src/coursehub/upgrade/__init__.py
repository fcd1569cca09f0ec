"""``coursehub upgrade``: back up, migrate, re-render and restart an install, servers kept."""
