"""Following a log as it grows: the follower and the terminal tail view."""
