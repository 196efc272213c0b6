package mme

import "container/list"

// lru orders keys by recency in O(1): a map to list elements, the list front
// being the most recently touched. It is not safe for concurrent use; its
// owner's mutex guards it.
type lru[K comparable, V any] struct {
	order list.List
	items map[K]*list.Element
}

type lruItem[K comparable, V any] struct {
	key K
	val V
}

func newLRU[K comparable, V any]() *lru[K, V] {
	return &lru[K, V]{items: make(map[K]*list.Element)}
}

// touch inserts k as the most recent, or moves it there.
func (c *lru[K, V]) touch(k K, v V) {
	if el, ok := c.items[k]; ok {
		el.Value.(*lruItem[K, V]).val = v
		c.order.MoveToFront(el)
		return
	}
	c.items[k] = c.order.PushFront(&lruItem[K, V]{key: k, val: v})
}

// remove drops k; it reports whether k was there.
func (c *lru[K, V]) remove(k K) bool {
	el, ok := c.items[k]
	if !ok {
		return false
	}
	c.order.Remove(el)
	delete(c.items, k)
	return true
}

// oldest returns the least recently touched entry.
func (c *lru[K, V]) oldest() (K, V, bool) {
	el := c.order.Back()
	if el == nil {
		var k K
		var v V
		return k, v, false
	}
	it := el.Value.(*lruItem[K, V])
	return it.key, it.val, true
}

func (c *lru[K, V]) len() int { return len(c.items) }
