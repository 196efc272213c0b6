// Package applicationautoscaling is Application Auto Scaling's API for
// SageMaker's scalable targets — endpoint variants' instance counts
// (sagemaker:variant:DesiredInstanceCount) and inference components' copy
// counts (sagemaker:inference-component:DesiredCopyCount) — in AWS JSON
// 1.1 (X-Amz-Target: AnyScaleFrontendService.<Operation>), with the
// service's error shapes, and the scaling it does:
//
//   - target tracking policies create and own their CloudWatch alarms
//     (AlarmHigh and AlarmLow, named as AWS names them) in the cloudwatch
//     Service, and scale proportionally when one is in ALARM
//     (decide.go holds the pure decisions);
//   - step scaling policies run when any alarm whose AlarmActions hold the
//     policy's ARN is in ALARM;
//   - scheduled actions (at, rate, cron) change a target's bounds.
//
// It owns its state folder (one file a scalable target, with its
// policies, scheduled actions, recent activities and cooldowns) and
// nothing else: capacities are read and changed only through the Targets
// the host hands to Run, alarms only through the cloudwatch Service. It
// never reaches an endpoint itself.
package applicationautoscaling
