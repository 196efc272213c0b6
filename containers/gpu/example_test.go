package gpu_test

import (
	"fmt"

	"github.com/mce-run/mce/containers/gpu"
)

func ExampleParseRequest() {
	for _, s := range []string{"all", "2", "0,GPU-5a3d1c2e-0f4b-4c1a-9e8d-1234567890ab"} {
		req, err := gpu.ParseRequest(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: all=%v count=%d ids=%v cdi=%v\n", req, req.All, req.Count, req.DeviceIDs, req.CDIDevices(nil))
	}
	_, err := gpu.ParseRequest("0")
	fmt.Println(err)
	// Output:
	// all: all=true count=0 ids=[] cdi=[nvidia.com/gpu=all]
	// count=2: all=false count=2 ids=[] cdi=[nvidia.com/gpu=0 nvidia.com/gpu=1]
	// device=0,GPU-5a3d1c2e-0f4b-4c1a-9e8d-1234567890ab: all=false count=0 ids=[0 GPU-5a3d1c2e-0f4b-4c1a-9e8d-1234567890ab] cdi=[nvidia.com/gpu=0 nvidia.com/gpu=GPU-5a3d1c2e-0f4b-4c1a-9e8d-1234567890ab]
	// invalid GPU request "0": count must be at least 1 (for device 0 alone write "device=0")
}

func ExampleCheck() {
	req, _ := gpu.ParseRequest("1")
	devs := []gpu.Device{{Index: 0, UUID: "GPU-5a3d1c2e-0f4b-4c1a-9e8d-1234567890ab", Name: "NVIDIA H100 80GB HBM3"}}
	rt := gpu.RuntimeInfo{Runtimes: []string{"runc"}, DefaultRuntime: "runc"}
	fmt.Println(gpu.Check(req, devs, nil, rt))
	// Output:
	// GPU requested (count=1) but the Docker engine has no NVIDIA container runtime (runtimes: runc) and CDI is off (no CDI spec folders); install nvidia-container-toolkit
}
