package abilities

// pages reads a server's list (tools, resources, prompts) page by page, at
// most max pages, instead of with the SDK's iterators, which follow a
// cursor for as long as the server gives one. fetch gets the page after
// cursor ("" for the first) and the cursor after it; take is given each
// item in turn and says whether to go on. more reports that the server
// had pages left after max (take having taken every item).
func pages[T any](max int, fetch func(cursor string) ([]T, string, error), take func(T) bool) (more bool, err error) {
	cursor := ""
	for range max {
		items, next, err := fetch(cursor)
		if err != nil {
			return false, err
		}
		for _, it := range items {
			if !take(it) {
				return false, nil
			}
		}
		if next == "" {
			return false, nil
		}
		cursor = next
	}
	return true, nil
}
