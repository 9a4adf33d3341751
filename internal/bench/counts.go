package bench

import "fmt"

// checkCounts refuses a list flag's counts (--agents, --spine, --ctx) that
// are empty or fall outside least..most, naming the flag and the list.
func checkCounts(flag string, ns []int, least, most int) error {
	for _, n := range ns {
		if n < least || n > most {
			return fmt.Errorf("%s %v: give a comma-separated list of counts %d..%d", flag, ns, least, most)
		}
	}
	if len(ns) == 0 {
		return fmt.Errorf("%s: give at least one count (%d..%d)", flag, least, most)
	}
	return nil
}
