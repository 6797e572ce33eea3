"""Following a log as it grows: yielding events as other processes commit them."""
