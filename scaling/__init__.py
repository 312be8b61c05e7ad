"""One model at one width: the training loop (train), the data and tasks it draws batches from (data, tasks) and
the coordinate check (coord_check), which measures how activation sizes move with width."""
