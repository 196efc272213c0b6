# Shared by scripts/bench.sh and scripts/bench-loadtest.sh (sourced, not run).

# remove_instance_leftovers WHO INSTANCE: removes the containers and networks
# mce's instance left behind (it should leave none), saying so on stderr.
remove_instance_leftovers() {
	local left nets
	left="$(docker ps -aq --filter "label=io.mce.instance=$2")"
	nets="$(docker network ls -q --filter "label=io.mce.instance=$2")"
	if [ -n "$left$nets" ]; then
		echo "$1: mce left containers/networks of instance $2 behind; removing them" >&2
		[ -z "$left" ] || docker rm -f $left >/dev/null 2>&1
		[ -z "$nets" ] || docker network rm $nets >/dev/null 2>&1
	fi
}

free_port() { # a free TCP port on 127.0.0.1, from $1 upwards
	local p="$1"
	while [ -n "$(ss -Htln "sport = :$p")" ]; do p=$((p + 1)); done
	echo "$p"
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
