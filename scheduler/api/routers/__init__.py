"""One router per resource: tasks, the fleet, and the API itself (health, who am I)."""
