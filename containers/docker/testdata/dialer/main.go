// Command dialer tries a TCP connection to each address given and prints
// "ADDR ok" or "ADDR fail: REASON" on a line of its own. The network
// isolation test runs it in containers on mce's endpoint networks.
package main

import (
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	for _, addr := range os.Args[1:] {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			fmt.Printf("%s fail: %v\n", addr, err)
			continue
		}
		c.Close()
		fmt.Printf("%s ok\n", addr)
	}
}
