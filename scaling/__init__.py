"""One model at one width: the training loop (train), the data and tasks it draws batches from (data, tasks) and
the coordinate check (coord_check), which measures how activation sizes move with width; compile_cache: where
torch.compile's caches live and what a run found in them."""
