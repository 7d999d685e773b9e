"""A population: runs that differ only in peak lr and seed, trained as one vmapped program
(program.py), by a loop that keeps one slot per member (trainer.py), from a points file
(points.py), each member writing its own run folder (member.py); run.py is the population's
run, as train/loop.py is a single run's."""
